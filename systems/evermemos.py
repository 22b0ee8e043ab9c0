"""An EverMemOS-style memory system (arXiv 2601.02163), every step a traced, registered op.

Ingestion: each session's messages accumulate in a buffer (``evermemos.buffer_update``); every
``boundary_check_every`` turns the LLM decides whether the newest messages start a new episode
(``evermemos.boundary_detection``, prompt ``boundary_detection``); a boundary, a session end or a
segment grown past ``max_segment_turns`` closes a segment (``evermemos.finalize_memory_unit``),
one LLM call turns it into a MemCell — episode, atomic facts, foresight
(``evermemos.extract_memory``, prompt ``memcell_extraction``) — and the cell is indexed
(``evermemos.index``). Question time: hybrid BM25 + dense retrieval fused with RRF, an LLM
sufficiency check, and when it says "insufficient" a query rewrite and a multi-query retrieval,
then a final rerank to ``top_k`` (see :mod:`memtrace_opt.systems.evermemos_retrieval`).

Graph names per conversation: ``buffer:s<k>`` (versions), ``boundary:<turn id>``,
``segment:<n>``, ``mem:cell<n>`` (memory units), ``index:evermemos`` (versions),
``candidates:<qa id>:r1|r2``, ``sufficiency:<qa id>``, ``queries:<qa id>``, ``retrieved:<qa id>``.
Lineage of an answer: answer ← retrieved ← candidates ← cells ← segment ← messages.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, Sequence

from pydantic import Field

from memtrace_opt.data.model import QA, Session
from memtrace_opt.graph import New, Next, OpContext, OpFailure, Variable, operation
from memtrace_opt.graph.model import BOUNDARY, BUFFER, EXTRACTION, INTERMEDIATE, MEMORY_UNIT, RETRIEVED
from memtrace_opt.systems import evermemos_prompts as P
from memtrace_opt.systems import evermemos_retrieval  # noqa: F401  (registers the retrieval ops)
from memtrace_opt.systems.base import MemorySystem, SystemSettings
from memtrace_opt.systems.registry import register_system

__all__ = ["EverMemOS", "EverMemOSSettings"]

SEGMENT = "segment"
INDEX_VAR = "index:evermemos"


class EverMemOSSettings(SystemSettings):
    """Knobs of the EverMemOS pipeline (config ``system.settings``)."""

    boundary_check_every: int = Field(4, ge=1, description="turns between LLM boundary checks (CPU models: 4+)")
    max_segment_turns: int = Field(16, ge=2, description="a segment this long closes without asking the LLM")
    rrf_k: int = Field(60, ge=1, description="reciprocal-rank-fusion constant")
    agentic: bool = Field(True, description="run the sufficiency check and, if needed, round 2")
    round1_k: int = Field(20, ge=1, description="candidates kept after each fused retrieval")
    search_depth: int = Field(50, ge=1, description="hits taken from BM25 and from dense search before fusion")
    check_k: int = Field(5, ge=1, description="top candidates shown to the sufficiency and rewrite prompts")
    max_queries: int = Field(3, ge=1, le=5, description="follow-up queries kept from the rewrite")
    extract_max_tokens: int = Field(512, ge=64, description="reply budget of one MemCell extraction")
    question_layout: Literal["separate", "shared_prefix"] = Field(
        "separate", description="separate: each question-time op its own prompt first; shared_prefix: the "
        "sufficiency check reads the reranked context the answer reads, and the check, the rewrite and the "
        "answer all open with that context and the question, so the KV cache prefills it once per question")
    verdict_reason_chars: int = Field(150, ge=0, le=300, description="length cap of the sufficiency check's "
                                      "'missing' reason (the rewrite's hint); 0 = a bare true/false verdict")


# -- ingestion ops ----------------------------------------------------------------------------------
@operation("evermemos.buffer_update", category=BUFFER)
def buffer_update(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Append the newest messages to the session's buffer."""
    return {"buffer": list(inputs.get("buffer") or []) + list(inputs["messages"])}


@operation("evermemos.boundary_detection", category=BOUNDARY, prompt=P.BOUNDARY)
def boundary_detection(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Decide whether the newest ``params["new"]`` buffered messages start a new episode.

    ``split`` in the decision is how many buffered messages the closing segment takes: the older
    ones on an LLM boundary, all of them on a forced close (``params["force"]``: session end,
    segment too long), which asks no LLM. An unparsable reply counts as "no boundary".
    """
    buffer = inputs["buffer"]
    if params.get("force"):
        return {"decision": {"boundary": True, "reason": f"forced: {params['force']}", "split": len(buffer)}}
    new = params["new"]
    current, newest = buffer[:-new], buffer[-new:]
    reply = ctx.chat([{"role": "system", "content": ctx.prompt},
                      {"role": "user", "content": P.render_boundary(current, newest)}],
                     max_tokens=80, json_schema=P.BOUNDARY_SCHEMA)
    verdict = P.parse_boundary(reply.text) if reply.finish_reason != "length" else None
    if verdict is None:
        raise OpFailure("boundary reply is not JSON with a boolean 'boundary'",
                        fallback={"decision": {"boundary": False, "reason": "unparsable reply", "split": 0}},
                        raw=reply.text)
    return {"decision": {**verdict, "split": len(current) if verdict["boundary"] else 0}}


@operation("evermemos.finalize_memory_unit", category=BUFFER)
def finalize_memory_unit(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Close the first ``params["split"]`` buffered messages; the rest stays for the next segment."""
    buffer, split = inputs["buffer"], params["split"]
    closed = buffer[:split]
    segment = {"segment": params["segment"], "date": closed[0].get("date") if closed else None,
               "turn_ids": [m["turn_id"] for m in closed], "messages": closed}
    return {"segment": segment, "buffer": buffer[split:]}


@operation("evermemos.extract_memory", category=EXTRACTION, prompt=P.EXTRACTION)
def extract_memory(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """One LLM call: the segment → a MemCell (episode, atomic facts, foresight).

    An unusable reply still yields a cell whose episode is the raw segment text, so the memory
    is degraded rather than lost, and the op is recorded as failed with the reply.
    """
    segment = inputs["segment"]
    base = {"cell": params["cell"], "date": segment["date"], "turn_ids": segment["turn_ids"]}
    reply = ctx.chat([{"role": "system", "content": ctx.prompt},
                      {"role": "user", "content": P.render_extraction(segment["messages"], segment["date"])}],
                     max_tokens=params["max_tokens"], json_schema=P.EXTRACTION_SCHEMA)
    parsed = P.parse_memcell(reply.text) if reply.finish_reason != "length" else None
    if parsed is None:
        raw_text = " ".join(P.message_lines(segment["messages"]).splitlines())
        fallback = {**base, "episode": raw_text, "facts": [], "foresight": []}
        why = "truncated" if reply.finish_reason == "length" else "not JSON with a non-empty 'episode'"
        raise OpFailure(f"memcell extraction reply is {why}", fallback={"cell": fallback}, raw=reply.text)
    return {"cell": {**base, **parsed}}


def _split_of(decision: Mapping[str, Any], buffered: int, new: int) -> int:
    """How many buffered messages a decision closes; 0 for none.

    A decision written by hand (an attribution counterfactual overriding the op's output) may say
    only ``{"boundary": true}``: it then closes everything before the newest messages.
    """
    if not decision.get("boundary"):
        return 0
    split = decision.get("split", buffered - new)
    return max(0, min(int(split), buffered))


# -- the system -------------------------------------------------------------------------------------
@register_system
class EverMemOS(MemorySystem):
    """EverMemOS: LLM-segmented episodes → MemCells → hybrid, agentic two-round retrieval."""

    name = "evermemos"
    default_prompts = P.DEFAULT_PROMPTS
    settings_model = EverMemOSSettings
    op_settings = {
        "evermemos.hybrid_retrieval": ("round1_k", "search_depth", "rrf_k"),
        "evermemos.multi_query_retrieval": ("round1_k", "search_depth", "max_queries"),
        "evermemos.final_rerank": ("top_k",),
        "evermemos.finalize_memory_unit": ("max_segment_turns", "boundary_check_every"),
    }
    settings: EverMemOSSettings

    def __init__(self, tracer: Any, settings: Any = None) -> None:
        super().__init__(tracer, settings)
        self.cells: list[Variable] = []
        self.index: Variable | None = None

    # -- ingestion ------------------------------------------------------------------------------
    def ingest_session(self, session: Session, messages: list[Variable]) -> None:
        """Buffer the session window by window, asking for boundaries; the session end always closes."""
        s, every = self.settings, self.settings.boundary_check_every
        buffer: Variable | None = None
        pending: list[Variable] = []
        windows = [messages[i : i + every] for i in range(0, len(messages), every)]
        for n, window in enumerate(windows):
            buffer = self._append(session.index, buffer, window)
            pending += window
            if n == len(windows) - 1:
                force = "session end"
            elif len(pending) >= s.max_segment_turns:
                force = "segment too long"
            elif len(pending) > len(window):
                force = None
            else:
                continue  # nothing older to split from: keep accumulating
            buffer, pending = self._maybe_close(buffer, pending, new=len(window), force=force)

    def _append(self, session: int, buffer: Variable | None, window: Sequence[Variable]) -> Variable:
        if buffer is None:
            return self.tracer.call("evermemos.buffer_update", inputs={"messages": list(window)},
                                    outputs={"buffer": New(f"buffer:s{session}", BUFFER)})["buffer"]
        return self.tracer.call("evermemos.buffer_update", inputs={"buffer": buffer, "messages": list(window)},
                                outputs={"buffer": Next(buffer)})["buffer"]

    def _maybe_close(self, buffer: Variable, pending: list[Variable], *, new: int,
                     force: str | None) -> tuple[Variable, list[Variable]]:
        """Ask (or force) a boundary; on one, close the segment and turn it into an indexed cell."""
        last_turn = pending[-1].value["turn_id"]
        decision = self.tracer.call(
            "evermemos.boundary_detection", inputs={"buffer": buffer}, params={"new": new, "force": force},
            outputs={"decision": New(f"boundary:{last_turn}", INTERMEDIATE)},
        )["decision"]
        split = _split_of(decision.value, len(pending), new)
        if split <= 0:
            return buffer, pending
        n = len(self.cells) + 1
        out = self.tracer.call(
            "evermemos.finalize_memory_unit",
            inputs={"buffer": buffer, "decision": decision, "messages": pending[:split]},
            params={"segment": f"segment:{n}", "split": split},
            outputs={"segment": New(f"segment:{n}", SEGMENT), "buffer": Next(buffer)},
        )
        self._form_cell(out["segment"], n)
        return out["buffer"], pending[split:]

    def _form_cell(self, segment: Variable, n: int) -> None:
        cell = self.tracer.call("evermemos.extract_memory", inputs={"segment": segment},
                                params={"cell": f"mem:cell{n}", "max_tokens": self.settings.extract_max_tokens},
                                outputs={"cell": New(f"mem:cell{n}", MEMORY_UNIT)})["cell"]
        self.cells.append(cell)
        inputs: dict[str, Any] = {"cell": cell}
        if self.index is None:
            spec: Any = New(INDEX_VAR, "index")
        else:
            inputs["index"], spec = self.index, Next(self.index)
        self.index = self.tracer.call("evermemos.index", inputs=inputs, outputs={"index": spec})["index"]

    # -- retrieval ------------------------------------------------------------------------------
    def retrieve(self, qa: QA, question: Variable) -> Variable:
        """Round 1 (hybrid + sufficiency), round 2 when insufficient, then the final rerank.

        In the ``shared_prefix`` layout round 1 is reranked first (``retrieved:<qa id>`` version 1), the
        check reads that context, and round 2, when needed, writes its next version.
        """
        s, qid = self.settings, qa.id
        search = {"depth": s.search_depth, "rrf_k": s.rrf_k, "k": s.round1_k}
        store: dict[str, Any] = {"cells": list(self.cells)}
        if self.index is not None:
            store["index"] = self.index
        candidates = self.tracer.call(
            "evermemos.hybrid_retrieval", inputs={"query": question, **store}, params=search,
            outputs={"candidates": New(f"candidates:{qid}:r1", INTERMEDIATE)},
        )["candidates"]
        if s.question_layout == "shared_prefix":
            return self._shared_prefix_rounds(qa, question, candidates, store, search)
        if s.agentic:
            candidates = self._agentic_round(qid, question, candidates, candidates, store, search) or candidates
        return self._rerank(qid, question, candidates, New(f"retrieved:{qid}", RETRIEVED))

    def _rerank(self, qid: str, question: Variable, candidates: Variable, out: New | Next) -> Variable:
        return self.tracer.call(
            "evermemos.final_rerank", inputs={"query": question, "candidates": candidates},
            params={"top_k": self.settings.top_k}, outputs={"context": out},
        )["context"]

    def _shared_prefix_rounds(self, qa: QA, question: Variable, candidates: Variable, store: dict[str, Any],
                              search: dict[str, Any]) -> Variable:
        qid = qa.id
        context = self._rerank(qid, question, candidates, New(f"retrieved:{qid}", RETRIEVED))
        if not self.settings.agentic:
            return context
        round2 = self._agentic_round(qid, question, context, candidates, store, search, shared=self.answer_params(qa))
        return context if round2 is None else self._rerank(qid, question, round2, Next(context))

    def answer_params(self, qa: QA) -> dict[str, Any]:
        params = super().answer_params(qa)
        if self.settings.question_layout != "separate":  # the separate layout's memo keys stay as they were
            params["layout"] = self.settings.question_layout
        return params

    def _agentic_round(self, qid: str, question: Variable, candidates: Variable, pool: Variable,
                       store: dict[str, Any], search: dict[str, Any], *,
                       shared: dict[str, Any] | None = None) -> Variable | None:
        """Sufficiency check on ``candidates``; when it says "insufficient", rewrite the query and search
        again, fusing with the ranked ``pool``. None when the check says sufficient.

        ``shared`` (the answer op's params) selects the shared-prefix messages: ``candidates`` is then the
        reranked context (chronological, so not a ranking: the fused round-1 list is the ``pool``).
        """
        s = self.settings
        layout = {} if shared is None else {**shared, "shown": s.top_k}
        check: dict[str, Any] = {"shown": s.check_k, **layout}
        if s.verdict_reason_chars != 150:  # the default's memo keys stay as they were
            check["reason_chars"] = s.verdict_reason_chars
        verdict = self.tracer.call(
            "evermemos.sufficiency_check", inputs={"query": question, "candidates": candidates},
            params=check, outputs={"verdict": New(f"sufficiency:{qid}", INTERMEDIATE)},
        )["verdict"]
        if verdict.value["sufficient"]:
            return None
        queries = self.tracer.call(
            "evermemos.query_rewrite", inputs={"query": question, "candidates": candidates, "verdict": verdict},
            params={"shown": s.check_k, "max_queries": s.max_queries, **layout},
            outputs={"queries": New(f"queries:{qid}", INTERMEDIATE)},
        )["queries"]
        return self.tracer.call(
            "evermemos.multi_query_retrieval", inputs={"queries": queries, "candidates": pool, **store},
            params=search, outputs={"candidates": New(f"candidates:{qid}:r2", INTERMEDIATE)},
        )["candidates"]
