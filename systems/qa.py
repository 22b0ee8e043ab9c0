"""The question-answering op every system shares (mem0/LoCoMo answer style).

The context is a list of memory records ``{"text", "date", ...}``; they are shown with their
dates so the model can turn relative dates ("last Tuesday") into absolute ones, and the answer is
kept short, as the LoCoMo judge and F1 expect.

The prompt component's instruction is the system message. Its learned rules (the block
:mod:`memtrace_opt.graph.prompt_parts` renders, added by the optimizer) go into the user message *after*
the memories, next to the question, so a candidate that only adds rules shares the instruction +
memories prefix with the seed prompt, which the model server keeps in its KV cache. Its worked
examples become **prior chat turns** — each example's memories and question as a user message in
the same layout as the real one, its correct answer as the assistant's reply — the few-shot layout
of DSPy's chat adapter. Pasted inline as text, the 1.5B model copied the examples' content into
other conversations' answers ("What is the name of Amara's sister?" answered with the sister's
name from an example); as turns, the same four examples took the quickstart's validation questions
from 4 of 12 (inline) to 7 of 12 (the seed answers 5). An example of another shape (hand-written
text) stays inline with the rules. A prompt without such blocks gives exactly the messages it
always gave.

Layout ``shared_prefix`` (param ``layout``; EverMemOS's ``question_layout``) puts the memories and the
question first, as the system message every question-time op of one question sends byte for byte
(:func:`shared_context_message`), and the op's instruction after it: the sufficiency check, the
query rewrite and the answer then share that prefix in the model server's KV cache, and each
prefills only its own instruction. Without the param the messages are exactly the separate layout's.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memtrace_opt.graph import OpContext, operation
from memtrace_opt.graph.model import QA
from memtrace_opt.graph.prompt_parts import compose_prompt, parse_example, split_prompt

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


#: Question-time message layouts: the instruction first (each op its own prompt) or the shared context first.
LAYOUTS: tuple[str, ...] = ("separate", "shared_prefix")


def _asked_on(question_date: str | None) -> str:
    return f"\nThe question is asked on {question_date}." if question_date else ""


def shared_context_message(question: str, context: Sequence[Mapping[str, Any]], question_date: str | None) -> dict[str, str]:
    """The first message of every ``shared_prefix`` op of one question: same memories, same bytes."""
    return {"role": "system",
            "content": f"Memories:\n{format_context(context)}\n\nQuestion: {question}{_asked_on(question_date)}"}


@operation("qa.answer", category=QA, prompt="question_answering")
def answer_question(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Answer the question from the retrieved memories with the (optimizable) QA prompt."""
    when = _asked_on(params.get("question_date"))
    parts = split_prompt(ctx.prompt or DEFAULT_QA_PROMPT)
    shots, inline = example_turns(parts.examples)
    learned = compose_prompt("", parts.rules, inline).strip()
    learned = f"{learned}\n\n" if learned else ""
    if params.get("layout", "separate") == "shared_prefix":
        shared = shared_context_message(inputs["question"], inputs["context"], params.get("question_date"))
        ask = f"{parts.instruction}\n\n{learned}Question: {inputs['question']}{when}\nAnswer:"
        messages = [shared, *shots, {"role": "user", "content": ask}]
    else:
        user = _user_message(format_context(inputs["context"]), f"{learned}Question: {inputs['question']}{when}")
        messages = [{"role": "system", "content": parts.instruction}, *shots, {"role": "user", "content": user}]
    reply = ctx.chat(messages, max_tokens=48)
    text = reply.text.strip().splitlines()[0].strip() if reply.text.strip() else ""
    return {"answer": text}


def _user_message(memories: str, question: str) -> str:
    return f"Memories:\n{memories}\n\n{question}\nAnswer:"


def example_turns(examples: Sequence[str]) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    """The worked examples that have a ``context`` and a ``question`` as user/assistant turn pairs (in
    the answer op's own message layout), and the rest, to be shown inline.

    >>> shots, rest = example_turns(["Input:\\ncontext: [1 May] Ann: I moved to Oslo.\\nquestion: Where?\\n"
    ...                              "Correct output: Oslo", "Q: x A: y"])
    >>> [m["role"] for m in shots], shots[1]["content"], rest
    (['user', 'assistant'], 'Oslo', ('Q: x A: y',))
    >>> shots[0]["content"].splitlines()[:2]
    ['Memories:', '- [1 May] Ann: I moved to Oslo.']
    """
    shots: list[dict[str, str]] = []
    inline: list[str] = []
    for text in examples:
        ex = parse_example(text)
        if ex is None or set(ex.inputs) != {"context", "question"}:
            inline.append(text)
            continue
        lines = [ln if ln.startswith("- ") or ln.startswith("(") else f"- {ln}"
                 for ln in ex.inputs["context"].splitlines() if ln.strip()]
        shots += [{"role": "user", "content": _user_message("\n".join(lines) or "(no memories)",
                                                           f"Question: {ex.inputs['question']}")},
                  {"role": "assistant", "content": ex.output}]
    return shots, tuple(inline)
