"""Shared fixtures of the optimizer and loop tests: a tiny traced system with prompt-sensitive scripted LMs.

System ``looptest`` (registered on import, run through the real runner): per message an
``extract`` op (prompt ``fact_extraction``) and a ``decide`` op (prompt ``memory_update``) make a
memory unit; retrieval returns the first ``top_k`` units; the shared ``qa.answer`` op answers.

:class:`TaskLM` behaves by prompt text: question answering is right only when its instructions
contain :data:`QA_MAGIC` (otherwise it says "Not mentioned"); with ``extract_magic`` set, extraction
keeps a message only when its prompt contains that phrase. :class:`ReflectionLM` rewrites whatever
instruction it is shown by appending a sentence with the magic words, replying in a chosen format.
No test file ends up here; pytest collects it and finds nothing.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.data.model import QA, Conversation
from memtrace_opt.graph import MemoryGraph, New, OpContext, Variable, operation
from memtrace_opt.graph.model import EXTRACTION, MEMORY_UNIT, RETRIEVAL, RETRIEVED, UPDATE
from memtrace_opt.lm.base import LMResult
from memtrace_opt.lm.usage import AccountedLM
from memtrace_opt.optimizers.backend import RunnerBackend
from memtrace_opt.systems.base import QA_PROMPT, MemorySystem, SystemSettings
from memtrace_opt.systems.registry import register_system
from tests.scripted_lm import make_conversation

SYSTEM = "looptest"
QA_MAGIC = "check every memory"
SEED_QA = "Answer the question from the memories in at most six words."
PROMPTS = {
    "fact_extraction": "Extract the facts stated in the message.",
    "memory_update": "Decide whether the new fact should be stored.",
}


class LoopTestSettings(SystemSettings):
    top_k: int = 10


@operation("looptest.extract", category=EXTRACTION, prompt="fact_extraction")
def _extract(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    msg = inputs["message"]
    reply = ctx.chat([{"role": "system", "content": ctx.prompt or ""},
                      {"role": "user", "content": f"Message: {msg['speaker']}: {msg['text']}"}])
    return {"fact": {"text": reply.text, "date": msg["date"]}}


@operation("looptest.decide", category=UPDATE, prompt="memory_update")
def _decide(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    ctx.chat([{"role": "system", "content": ctx.prompt or ""},
              {"role": "user", "content": f"Fact: {inputs['fact']['text']}"}])
    return {"unit": dict(inputs["fact"])}


@operation("looptest.retrieve", category=RETRIEVAL)
def _retrieve(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    return {"context": [u for u in inputs["units"] if u["text"]][: params["top_k"]]}


@register_system
class LoopTestSystem(MemorySystem):
    """The fixture system (see module docstring)."""

    name = SYSTEM
    default_prompts = PROMPTS
    settings_model = LoopTestSettings

    def __init__(self, tracer: Any, settings: Any = None) -> None:
        super().__init__(tracer, settings)
        self.units: list[Variable] = []

    def ingest_session(self, session: Any, messages: list[Variable]) -> None:
        for msg in messages:
            turn = msg.value["turn_id"]
            fact = self.tracer.call("looptest.extract", inputs={"message": msg},
                                    outputs={"fact": New(f"fact:{turn}", "facts")})["fact"]
            unit = self.tracer.call("looptest.decide", inputs={"fact": fact},
                                    outputs={"unit": New(f"mem:{turn}", MEMORY_UNIT)})["unit"]
            self.units.append(unit)

    def retrieve(self, qa: Any, question: Variable) -> Variable:
        return self.tracer.call("looptest.retrieve", inputs={"query": question, "units": self.units},
                                params={"top_k": self.settings.top_k},
                                outputs={"context": New(f"retrieved:{qa.id}", RETRIEVED)})["context"]


class TaskLM:
    """The system's LM; replies depend on the prompt text (see module docstring). Counts calls by kind.

    The QA reply is the gold answer of the question that occurs in the shown memories (questions
    repeat across conversations with different answers), or "Not mentioned".
    """

    model_id = "scripted/looptest-task"

    def __init__(self, convs: Sequence[Conversation], *, extract_magic: str | None = None) -> None:
        self.extract_magic = extract_magic
        self.golds: dict[str, list[str]] = {}
        for conv in convs:
            for qa in conv.qa:
                self.golds.setdefault(qa.question, []).append(qa.answer)
        self.calls: dict[str, int] = {"extract": 0, "decide": 0, "qa": 0}

    def chat(self, messages: list[dict[str, str]], **kw: Any) -> LMResult:
        system, user = messages[0]["content"], messages[-1]["content"]
        if user.startswith("Message: "):
            self.calls["extract"] += 1
            text = user.removeprefix("Message: ").split(": ", 1)[1]
            reply = text if self.extract_magic is None or self.extract_magic in system else ""
        elif user.startswith("Fact: "):
            self.calls["decide"] += 1
            reply = "STORE"
        else:
            self.calls["qa"] += 1
            reply = self._answer(system, user)
        return LMResult(text=reply, model=self.model_id, prompt_tokens=len(user.split()), completion_tokens=2)

    def _answer(self, system: str, user: str) -> str:
        question = re.search(r"Question: (.+?)(?:\n|$)", user).group(1)  # type: ignore[union-attr]
        memories = user.split("Question:")[0].lower()
        found = [g for g in self.golds.get(question, []) if g.lower() in memories]
        learned = user.split("Question:")[0]  # rules/examples sit after the memories (systems.qa)
        return found[0] if (QA_MAGIC in system or QA_MAGIC in learned) and found else "Not mentioned"

    @property
    def ingestion_calls(self) -> int:
        return self.calls["extract"] + self.calls["decide"]


class ReflectionLM:
    """Appends "Always <magic> before answering." to the instruction it is shown; records components asked.

    ``style``: ``fenced``, ``json`` or ``label`` replies to a rewrite request; ``echo`` hands the
    instruction back unchanged (as small models do), which makes the proposer ask for rules, answered
    with one bullet. A one-rule request (the delta proposer's) gets "If the step receives a question naming a person,
    it should <magic> before answering."
    """

    model_id = "scripted/looptest-reflection"

    def __init__(self, *, style: str = "fenced", magic: str = QA_MAGIC) -> None:
        self.style = style
        self.magic = magic
        self.components: list[str] = []

    def chat(self, messages: list[dict[str, str]], **kw: Any) -> LMResult:
        prompt = messages[-1]["content"]
        if "Write ONE short general rule" in prompt:  # the delta proposer's rule request (optimizers.rules)
            self.components.append(re.search(r'A step "(.+?)"', prompt).group(1))  # type: ignore[union-attr]
            text = f"If the step receives a question naming a person, it should {self.magic} before answering."
            return LMResult(text=text, model=self.model_id, prompt_tokens=len(prompt.split()), completion_tokens=9)
        self.components.append(re.search(r'step, "(.+?)"', prompt).group(1))  # type: ignore[union-attr]
        current = re.search(r"instruction:\n```\n(.*?)\n```", prompt, re.S).group(1)  # type: ignore[union-attr]
        rule = f"Always {self.magic} before answering."
        new = f"{current} {rule}"
        if "short new rules" in prompt:
            text = f"Here are the rules:\n- {rule}\n"
        elif self.style == "echo":
            text = f"```\n{current}\n```"
        elif self.style == "json":
            text = '{"new_instruction": "%s"}' % new
        elif self.style == "label":
            text = f"New instruction: {new}"
        else:
            text = f"Here is the improved instruction:\n```text\n{new}\n```\nIt should help."
        return LMResult(text=text, model=self.model_id, prompt_tokens=len(prompt.split()), completion_tokens=9)


def conversations() -> list[Conversation]:
    """Three small conversations: c-opt (optimize), c-val (validation), c-held (heldout)."""
    out = []
    for cid, (pet, city, job) in {"c-opt": ("Biscuit", "Bristol", "nurse"), "c-val": ("Pepper", "Leeds", "baker"),
                                  "c-held": ("Mango", "Cardiff", "pilot")}.items():
        sessions = [[("Ann", f"My cat is called {pet}."), ("Bob", f"I moved to {city} last year.")],
                    [("Ann", f"I work as a {job} now."), ("Bob", "Nice, congratulations!")]]
        qas = [{"question": "What is Ann's cat called?", "answer": pet, "evidence": ["D1:1"]},
               {"question": "Where does Bob live?", "answer": city, "evidence": ["D1:2"]},
               {"question": "What does Ann work as?", "answer": job, "evidence": ["D2:1"]}]
        out.append(make_conversation(sessions, qas, conv_id=cid))
    return out


def qa_blamer(component: str = QA_PROMPT):
    """A scripted attributor: every failure is a ResponseError of the answer op (prompt ``component``)."""

    def attribute(graph: MemoryGraph, conversation: Conversation, qas: Sequence[QA]) -> dict[str, BlameSignal]:
        out = {}
        for qa in qas:
            op = graph.producer[graph.latest_id(f"answer:{qa.id}")]
            out[qa.id] = BlameSignal(qa.id, qa.question, qa.answer, str(graph.value(graph.latest_id(f"answer:{qa.id}"))),
                                     "ResponseError", op, component, "the context held the answer")
        return out

    return attribute


def accounted(lm: Any, role: str) -> AccountedLM:
    """Wrap a scripted LM so the loop's call observer counts its calls (as factory-built clients are)."""
    return AccountedLM(lm, None, role)


def backend(task: Any, **settings: Any) -> RunnerBackend:
    return RunnerBackend(SYSTEM, lms={"task": accounted(task, "task")}, settings=settings, judge="deterministic")


def seed_prompts() -> dict[str, str]:
    """The system's prompt set with the weak seed QA prompt."""
    return {**LoopTestSystem.prompts(), QA_PROMPT: SEED_QA}
