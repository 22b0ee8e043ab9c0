"""A tiny traced memory system for graph tests: extract (LM) -> store/update/delete -> retrieve -> answer (LM).

Its LM is scripted (see ``PromptEchoLM``): replies depend on the prompt text, so tests can check that a
prompt change re-executes exactly the ops that use it.
"""

from __future__ import annotations

from memtrace_opt.graph import End, New, Next, Tracer, operation
from memtrace_opt.graph.model import ANSWER, MEMORY_UNIT, MESSAGE, QUERY
from memtrace_opt.lm.base import LMResult

PROMPTS = {"extract": "Extract facts.", "answer": "Answer briefly."}


class PromptEchoLM:
    """Replies '<first word of system prompt>:<user text>' and counts calls."""

    model_id = "scripted/echo"

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages, **kw):
        self.calls += 1
        tag = messages[0]["content"].split()[0]
        return LMResult(text=f"{tag}:{messages[-1]['content']}", model=self.model_id, prompt_tokens=3, completion_tokens=2)


@operation("toy.extract", category="extraction", prompt="extract")
def _extract(ctx, inputs, params):
    reply = ctx.chat([{"role": "system", "content": ctx.prompt}, {"role": "user", "content": inputs["message"]}])
    return {"fact": reply.text}


@operation("toy.store", category="update", memoize=False)
def _store(ctx, inputs, params):
    return {"unit": inputs["fact"]}


@operation("toy.delete", category="deletion", memoize=False)
def _delete(ctx, inputs, params):
    return {"unit": None}


@operation("toy.retrieve", category="retrieval")
def _retrieve(ctx, inputs, params):
    words = set(inputs["query"].lower().split())
    hits = [u for u in inputs["units"] if words & set(u.lower().replace(":", " ").split())]
    return {"context": hits[: params["top_k"]]}


@operation("toy.answer", category="question-answering", prompt="answer")
def _answer(ctx, inputs, params):
    ctx_text = " | ".join(inputs["context"])
    reply = ctx.chat([{"role": "system", "content": ctx.prompt}, {"role": "user", "content": ctx_text}])
    return {"answer": reply.text}


def run_toy(tracer: Tracer, sessions: list[list[str]], questions: list[str], *, delete_word: str | None = None) -> None:
    """Ingest each session's messages into one memory unit per slot, then answer each question."""
    units: dict[int, object] = {}
    for s, messages in enumerate(sessions, start=1):
        with tracer.session(f"ingest:s{s}", kind="ingest"):
            for t, text in enumerate(messages, start=1):
                msg = tracer.variable(f"message:D{s}:{t}", text, category=MESSAGE)
                fact = tracer.call("toy.extract", inputs={"message": msg}, outputs={"fact": New(f"fact:D{s}:{t}", "facts")})["fact"]
                slot = t
                if slot in units and units[slot].value is not None:
                    units[slot] = tracer.call("toy.store", inputs={"fact": fact}, outputs={"unit": Next(units[slot])})["unit"]
                else:
                    units[slot] = tracer.call("toy.store", inputs={"fact": fact}, outputs={"unit": New(f"mem:{slot}", MEMORY_UNIT)})["unit"]
                if delete_word and delete_word in text:
                    units[slot] = tracer.call("toy.delete", inputs={}, outputs={"unit": End(units[slot])})["unit"]
    for q, question in enumerate(questions):
        with tracer.session(f"answer:q{q}", kind="answer"):
            qv = tracer.variable(f"question:q{q}", question, category=QUERY)
            live = [u for u in units.values() if u.value is not None]
            ctx = tracer.call("toy.retrieve", inputs={"query": qv, "units": live}, params={"top_k": 3},
                              outputs={"context": New(f"retrieved:q{q}", "retrieved-context")})["context"]
            tracer.call("toy.answer", inputs={"question": qv, "context": ctx}, outputs={"answer": New(f"answer:q{q}", ANSWER)})
