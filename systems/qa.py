"""The question-answering op every system shares (mem0/LoCoMo answer style).

The context is a list of memory records ``{"text", "date", ...}``; they are shown with their
dates so the model can turn relative dates ("last Tuesday") into absolute ones, and the answer is
kept short, as the LoCoMo judge and F1 expect.

The prompt component's instruction is the system message; its learned rules and worked examples
(the blocks :mod:`memtrace_opt.prompt_parts` renders, added by the optimizer) go into the user
message *after* the memories, next to the question. So every candidate that only adds rules or
examples shares the instruction + memories prefix with the seed prompt, which the model server
keeps in its KV cache: a 4k-token conversation is read once per conversation, not once per
candidate. A prompt without such blocks gives exactly the messages it always gave.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memtrace_opt.graph import OpContext, operation
from memtrace_opt.graph.model import QA
from memtrace_opt.prompt_parts import compose_prompt, split_prompt

DEFAULT_QA_PROMPT = """You answer questions about a long conversation between two people, using only the memories below.
Each memory has the date of the conversation session it came from.
- Use the memory dates to resolve relative times ("last year", "yesterday") into absolute dates.
- If memories conflict, trust the most recent one.
- Answer in at most 6 words. No explanation.
- If the memories do not contain the answer, reply exactly: Not mentioned."""


def format_context(records: Sequence[Mapping[str, Any]]) -> str:
    """Memories as dated lines, oldest first, for the answer prompt."""
    if not records:
        return "(no memories)"
    lines = []
    for rec in records:
        date = rec.get("date") or "unknown date"
        lines.append(f"- [{date}] {rec.get('text', '')}")
    return "\n".join(lines)


@operation("qa.answer", category=QA, prompt="question_answering")
def answer_question(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Answer the question from the retrieved memories with the (optimizable) QA prompt."""
    when = f"\nThe question is asked on {params['question_date']}." if params.get("question_date") else ""
    parts = split_prompt(ctx.prompt or DEFAULT_QA_PROMPT)
    learned = compose_prompt("", parts.rules, parts.examples).strip()
    learned = f"{learned}\n\n" if learned else ""
    user = (f"Memories:\n{format_context(inputs['context'])}\n\n{learned}"
            f"Question: {inputs['question']}{when}\nAnswer:")
    reply = ctx.chat([{"role": "system", "content": parts.instruction}, {"role": "user", "content": user}],
                     max_tokens=48)
    text = reply.text.strip().splitlines()[0].strip() if reply.text.strip() else ""
    return {"answer": text}
