"""Keyword memory: a 60-line memory system written against memtrace-opt's plugin contract.

Each message becomes a memory unit holding the message and the keywords an LM extracted from it
(op ``keyword.extract``, prompt component ``keyword_extraction``); a question retrieves the
``top_k`` units sharing most keywords with it (``keyword.search``, no LM); the system answers with
its *own* answer op and prompt (``keyword.answer`` / ``keyword_answer``) instead of the shared one.
Every op is a plain function registered with ``@operation``; the tracer records its inputs, outputs,
prompt and LM calls, so the run can be attributed, replayed and optimized like the built-in systems.

Use it from a config (``system: {module: keyword_memory.system, name: keyword}``, with this folder's
parent on ``PYTHONPATH``) or install a package declaring the entry point
``[project.entry-points."memtrace_opt.systems"] keyword = "keyword_memory.system:KeywordMemory"``.
"""

from __future__ import annotations

import re
from typing import Any

from memtrace_opt.attribution.priors import SystemPrior
from memtrace_opt.graph import New, OpContext, Variable, operation
from memtrace_opt.graph.model import EXTRACTION, MEMORY_UNIT, QA, RETRIEVAL, RETRIEVED
from memtrace_opt.systems.base import MemorySystem, SystemSettings, format_message
from memtrace_opt.systems.qa import format_context
from memtrace_opt.systems.registry import register_system

EXTRACT_PROMPT = "List the 3 to 6 most important keywords of the message (names, places, things, dates), comma-separated."
ANSWER_PROMPT = "Answer the question from the memories in at most 6 words. If they do not say, reply: Not mentioned."


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


@operation("keyword.extract", category=EXTRACTION, prompt="keyword_extraction")
def extract(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    message = inputs["message"]
    reply = ctx.chat([{"role": "system", "content": ctx.prompt},
                      {"role": "user", "content": format_message(message)}], max_tokens=32)
    keywords = sorted(words(reply.text))
    return {"unit": {"text": format_message(message), "date": message["date"], "keywords": keywords}}


@operation("keyword.search", category=RETRIEVAL)
def search(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    asked = words(inputs["question"])
    ranked = sorted(inputs.get("units") or [], key=lambda u: -len(asked & set(u["keywords"])))
    return {"context": [u for u in ranked[: params["top_k"]] if asked & set(u["keywords"])]}


@operation("keyword.answer", category=QA, prompt="keyword_answer")
def answer(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    user = f"Memories:\n{format_context(inputs['context'])}\n\nQuestion: {inputs['question']}\nAnswer:"
    reply = ctx.chat([{"role": "system", "content": ctx.prompt}, {"role": "user", "content": user}], max_tokens=32)
    return {"answer": (reply.text.strip().splitlines() or [""])[0]}


@register_system
class KeywordMemory(MemorySystem):
    """Keyword-indexed message memory (see the module docstring)."""

    name = "keyword"
    default_prompts = {"keyword_extraction": EXTRACT_PROMPT, "keyword_answer": ANSWER_PROMPT}
    settings_model = SystemSettings
    answer_op = "keyword.answer"
    attribution_prior = SystemPrior("keyword", (EXTRACTION,), (EXTRACTION,),
                                    "Keyword memory: check the keywords extracted from the evidence message, "
                                    "then the keyword search, then the answer.")

    def __init__(self, tracer: Any, settings: Any = None) -> None:
        super().__init__(tracer, settings)
        self.units: list[Variable] = []

    def ingest_session(self, session: Any, messages: list[Variable]) -> None:
        for message in messages:
            turn = message.value["turn_id"]
            made = self.tracer.call("keyword.extract", inputs={"message": message},
                                    outputs={"unit": New(f"mem:{turn}", MEMORY_UNIT, "message + keywords")})
            self.units.append(made["unit"])

    def retrieve(self, qa: Any, question: Variable) -> Variable:
        return self.tracer.call("keyword.search", inputs={"question": question, "units": self.units},
                                params={"top_k": self.settings.top_k},
                                outputs={"context": New(f"retrieved:{qa.id}", RETRIEVED)})["context"]
