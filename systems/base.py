"""The one interface every memory system implements, and the steps they all share.

A system is mostly its registered operations (see :mod:`memtrace_opt.graph.ops`): ``ingest``
turns each conversation session into memory through traced ops, ``answer`` retrieves a context
and hands it to the shared question-answering op. Tracing, sessions, message and question
variables are handled here once, so a concrete system only declares its ops and its prompts.

Variable naming (per conversation graph): ``message:<turn id>`` (``message:D1:3``),
``question:<qa id>``, ``gold:<qa id>``, ``retrieved:<qa id>``, ``answer:<qa id>``,
``judgement:<qa id>``. Memory units are ``mem:<unit id>`` with versions.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping

from pydantic import BaseModel, ConfigDict

from memtrace_opt.data.model import QA, Conversation, Session, Turn
from memtrace_opt.graph import New, Tracer, Variable
from memtrace_opt.graph.model import ANSWER, MESSAGE, QUERY

QA_PROMPT = "question_answering"


class SystemSettings(BaseModel):
    """Base of each system's settings (the config's ``system.settings``); unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    #: How many memory units retrieval returns for a question (systems without retrieval ignore it).
    top_k: int = 10


def message_value(turn: Turn, session: Session) -> dict[str, Any]:
    """What a message variable holds: who said what, when, and its turn id (for evidence lineage)."""
    return {"turn_id": turn.id, "speaker": turn.speaker, "text": turn.text, "date": session.date_time}


def format_message(msg: Mapping[str, Any]) -> str:
    return f"{msg['speaker']}: {msg['text']}"


_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def approx_tokens(text: str) -> int:
    """Approximate LLM token count: words plus punctuation marks.

    Exact BPE counting needs tiktoken's encoding files, a download (unavailable offline), and the
    embedded model's own tokenizer means loading it; for English chat this count is within about
    ±25% of GPT/Qwen BPE counts, enough for budgets (context length, chunk size) that are rules of
    thumb anyway. Deterministic, so budgets trim at the same turn on every run.

    >>> approx_tokens("Hi Tom! I adopted a cat.")
    8
    """
    return len(_TOKEN_RE.findall(text))


class MemorySystem(ABC):
    """A traced memory system. Subclasses set ``name``, ``default_prompts``, ``settings_model`` and
    implement :meth:`ingest_session` and :meth:`retrieve`.

    Answering: by default the shared ``qa.answer`` op (prompt component ``question_answering``,
    mem0's LoCoMo answer style) answers from :meth:`retrieve`'s context. A system with its own answer
    prompt registers its own op (``@operation("my.answer", category=QA, prompt="my_answer")``, same
    inputs ``question`` and ``context``) and names it in ``answer_op``, its text in ``default_prompts``;
    :meth:`prompts` then lists only that. ``answer_prompt`` changes the shared op's default text
    without a new op. ``attribution_prior`` says where the system tends to lose information (see
    :mod:`memtrace_opt.attribution.priors`). ``op_settings`` names, for each op no prompt controls,
    the settings that govern it: blame on such an op is beyond any prompt optimizer, and the
    setting is what a user (or the loop's ``tuning`` stage) can change instead.
    """

    name: ClassVar[str]
    default_prompts: ClassVar[Mapping[str, str]]
    settings_model: ClassVar[type[SystemSettings]] = SystemSettings
    answer_op: ClassVar[str] = "qa.answer"
    answer_prompt: ClassVar[str | None] = None
    attribution_prior: ClassVar[Any] = None
    op_settings: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    def __init__(self, tracer: Tracer, settings: Mapping[str, Any] | SystemSettings | None = None) -> None:
        self.tracer = tracer
        if isinstance(settings, SystemSettings):
            self.settings = settings
        else:
            self.settings = self.settings_model(**dict(settings or {}))
        #: ``question:<qa id>`` variables made by :meth:`answer`, so the runner can judge against them.
        self.questions: dict[str, Variable] = {}

    @property
    def resources(self) -> dict[str, Any]:
        """The tracer's resource dict, which ops see as ``ctx.resources``: stores, indexes, the embedder.

        A system keeps its mutable state (a vector index) here rather than on itself because ops are
        plain functions of ``(ctx, inputs, params)``; a fresh system instance starts fresh state.
        """
        if self.tracer.resources is None:
            self.tracer.resources = {}
        return self.tracer.resources

    def embedder(self) -> Any:
        """The embedder given in the resources (tests pass a fake one), else the shared MiniLM."""
        found = self.resources.get("embedder")
        if found is None:
            from memtrace_opt.lm.embeddings import get_embedder

            found = self.resources["embedder"] = get_embedder()
        return found

    @classmethod
    def prompts(cls) -> dict[str, str]:
        """The system's prompt components ``{name: default text}``: its own, plus the answer op's when that
        op reads a component the system does not define (the shared ``question_answering``)."""
        from memtrace_opt.graph.ops import get_spec
        from memtrace_opt.systems.qa import DEFAULT_QA_PROMPT

        out = dict(cls.default_prompts)
        component = get_spec(cls.answer_op).prompt
        if component is not None and component not in out:
            out[component] = cls.answer_prompt or DEFAULT_QA_PROMPT
        return out

    # -- ingestion ------------------------------------------------------------------------------
    def ingest(self, conversation: Conversation) -> None:
        """Ingest every session of ``conversation`` in order, one traced session each."""
        for session in conversation.sessions:
            with self.tracer.session(f"ingest:s{session.index}", kind="ingest", date=session.date_time):
                messages = [
                    self.tracer.variable(f"message:{turn.id}", message_value(turn, session), category=MESSAGE)
                    for turn in session.turns
                ]
                self.ingest_session(session, messages)
        self.finish_ingest()

    @abstractmethod
    def ingest_session(self, session: Session, messages: list[Variable]) -> None:
        """Turn one session's message variables into memory through traced ops."""

    def finish_ingest(self) -> None:
        """Flush buffers after the last session (systems that buffer messages override this)."""

    # -- answering ------------------------------------------------------------------------------
    def answer(self, qa: QA) -> Variable:
        """Answer one question in its own traced session; returns the answer variable."""
        with self.tracer.session(f"answer:{qa.id}", kind="answer", qa_id=qa.id):
            question = self.tracer.variable(f"question:{qa.id}", qa.question, category=QUERY)
            self.questions[qa.id] = question
            context = self.retrieve(qa, question)
            return self.tracer.call(
                self.answer_op,
                inputs={"question": question, "context": context},
                params=self.answer_params(qa),
                outputs={"answer": New(f"answer:{qa.id}", ANSWER)},
            )["answer"]

    def answer_params(self, qa: QA) -> dict[str, Any]:
        """The answer op's params: the question date; a system adds its message layout here."""
        return {"question_date": getattr(qa, "question_date", None)}

    @abstractmethod
    def retrieve(self, qa: QA, question: Variable) -> Variable:
        """Produce the ``retrieved:<qa id>`` variable: a list of ``{"text", "date", ...}`` memory records."""


# Every system's answer() calls the shared ``qa.answer`` op: register it whenever a system is, so a
# replay in a fresh process (counterfactual verification) finds it. qa imports nothing from here.
import memtrace_opt.systems.qa  # noqa: E402,F401
