"""The GEPA adapter: a memory system's prompts as GEPA text components, evaluated by replay.

A candidate is plain data, ``{component: text}`` (the optimized components only; the rest of the
system's prompt set stays at ``base_prompts``). Evaluating it on a batch of questions replays the
conversation's nearest recorded graph with the candidate's texts, so only operations that read a
changed prompt — and what they feed — run again; the score of a question is its judge score.

With ``capture_traces`` (GEPA's reflective minibatch) each case's trajectory keeps its graph and,
in ``attributed`` mode, the blame for a failure, computed by the attributor on that very graph and
cached per (prompt set, question). ``make_reflective_dataset`` turns trajectories into each
component's records (:mod:`memtrace_opt.optimizers.feedback`).

With ``scoped_replay``, GEPA's minibatch scores (a batch with no question of ``full_conversations``,
the validation set) come from scoped replays: only the ops upstream of the batch's questions run
again (:mod:`memtrace_opt.graph.replay`). Validation, the loop's own runs and the held-out final
always replay in full. ``scoped_rollouts`` counts the scores made the cheap way.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import Any, Callable, Collection, Mapping, Sequence

from gepa.core.adapter import EvaluationBatch

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.data.model import QA, Conversation
from memtrace_opt.errors import ConfigError
from memtrace_opt.graph import MemoryGraph, read_judged_outcome
from memtrace_opt.optimizers.backend import GraphJob, SystemBackend
from memtrace_opt.optimizers.cases import CaseTrace, QACase
from memtrace_opt.optimizers.feedback import FEEDBACK_MODES, reflective_records
from memtrace_opt.optimizers.graphs import GraphStore, StoredGraph

__all__ = ["Attributor", "MemoryPromptAdapter", "prompt_set_sha"]

Attributor = Callable[[MemoryGraph, Conversation, Sequence[QA]], Mapping[str, BlameSignal]]
"""``attributor(graph, conversation, failed_qas) -> {qa id: blame}`` for the questions it could attribute."""


def prompt_set_sha(prompts: Mapping[str, str]) -> str:
    """A short stable hash of a whole prompt set (cache key for blame)."""
    blob = json.dumps(dict(prompts), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class MemoryPromptAdapter:
    """GEPA adapter over a :class:`SystemBackend`; see the module docstring."""

    propose_new_texts = None  # GEPA uses the loop's proposer (custom_candidate_proposer)

    def __init__(
        self,
        backend: SystemBackend,
        conversations: Sequence[Conversation],
        *,
        base_prompts: Mapping[str, str],
        mode: str = "attributed",
        attributor: Attributor | None = None,
        store: GraphStore | None = None,
        scoped_replay: bool = False,
        full_conversations: Collection[str] = (),
    ) -> None:
        if mode not in FEEDBACK_MODES:
            raise ValueError(f"unknown feedback mode {mode!r}; expected one of {FEEDBACK_MODES}")
        if mode == "attributed" and attributor is None:
            raise ValueError("attributed feedback needs an attributor")
        self.backend = backend
        self.conversations = {c.id: c for c in conversations}
        self.base_prompts = dict(base_prompts)
        self.mode = mode
        self.attributor = attributor
        self.store = store or GraphStore()
        self.rollouts = 0
        self.scoped_replay = scoped_replay
        self.full_conversations = frozenset(full_conversations)
        self.scoped_rollouts = 0
        self._blame: dict[tuple[str, str], BlameSignal | None] = {}

    # -- GEPA protocol ----------------------------------------------------------------------------
    def evaluate(
        self, batch: list[QACase], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch[CaseTrace, dict[str, Any]]:
        """Scores (judge 0/1) of ``batch`` under ``candidate``; trajectories only when asked."""
        scoped = self.scoped_replay and not any(c.conversation_id in self.full_conversations for c in batch)
        traces = self.run(batch, candidate, blame=capture_traces, scoped=scoped)
        return EvaluationBatch(
            outputs=[t.output() for t in traces],
            scores=[t.score for t in traces],
            trajectories=traces if capture_traces else None,
        )

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: EvaluationBatch, components_to_update: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        """Each requested component's records under this adapter's feedback mode."""
        traces = eval_batch.trajectories or []
        return {c: reflective_records(self.mode, traces, c) for c in components_to_update}

    # -- evaluation ---------------------------------------------------------------------------------
    def full_prompts(self, candidate: Mapping[str, str]) -> dict[str, str]:
        """The whole prompt set a candidate stands for."""
        unknown = set(candidate) - set(self.base_prompts)
        if unknown:
            raise ConfigError("optimizer", "candidate", f"unknown prompt components {sorted(unknown)}; "
                              f"the system has {sorted(self.base_prompts)}")
        return {**self.base_prompts, **candidate}

    def run(self, cases: Sequence[QACase], candidate: Mapping[str, str], *, blame: bool = False,
            scoped: bool = False) -> list[CaseTrace]:
        """Evaluate ``cases`` under ``candidate``; with ``blame``, attach blame to failures (attributed mode);
        ``scoped``: by scoped replays where a full graph of the conversation answered these questions."""
        prompts = self.full_prompts(candidate)
        by_conv: dict[str, list[QACase]] = defaultdict(list)
        for case in cases:
            by_conv[case.conversation_id].append(case)
        graphs = self._graphs(by_conv, prompts, scoped=scoped)
        traces = [self._trace(case, graphs[case.conversation_id]) for case in cases]
        self.rollouts += len(cases)
        self.scoped_rollouts += sum(1 for t in traces if "scoped_to" in t.graph.meta)
        if blame and self.mode == "attributed":
            self._attach_blame(traces, prompts)
        return traces

    def remember_blame(self, candidate: Mapping[str, str], blame: Mapping[str, BlameSignal]) -> None:
        """Seed the blame cache with ``{qa id: blame}`` (the loop attributes a round's failures up front)."""
        sha = prompt_set_sha(self.full_prompts(candidate))
        for qa_id, signal in blame.items():
            self._blame[(sha, qa_id)] = signal

    def _qa(self, case: QACase) -> QA:
        conv = self.conversations.get(case.conversation_id)
        qa = next((q for q in conv.qa if q.id == case.qa_id), None) if conv else None
        if qa is None:
            raise ConfigError("optimizer", "split", f"no question {case.qa_id!r} in conversation "
                              f"{case.conversation_id!r}")
        return qa

    def _graphs(self, by_conv: Mapping[str, Sequence[QACase]], prompts: dict[str, str], *,
                scoped: bool) -> dict[str, MemoryGraph]:
        """A graph per conversation: from the store when one answers these questions under these prompts,
        else made by the backend (all conversations' jobs at once, so an executor can run them together)."""
        graphs: dict[str, MemoryGraph] = {}
        jobs: dict[str, tuple[GraphJob, bool]] = {}
        for cid, cases in by_conv.items():
            made = self._job_for(cid, cases, prompts, scoped=scoped)
            if isinstance(made, MemoryGraph):
                graphs[cid] = made
            else:
                jobs[cid] = made
        made = self.backend.graphs([j for j, _ in jobs.values()]) if jobs else []
        for (cid, (job, is_scoped)), graph in zip(jobs.items(), made):
            self.store.add(cid, StoredGraph(graph, dict(prompts), frozenset(q.id for q in job.qas), scoped=is_scoped))
            graphs[cid] = graph
        return graphs

    def _job_for(self, conversation_id: str, cases: Sequence[QACase], prompts: dict[str, str], *,
                 scoped: bool = False) -> MemoryGraph | tuple[GraphJob, bool]:
        """The stored graph that serves these questions, or the job that makes one (and whether it is scoped)."""
        conv = self.conversations[conversation_id]
        wanted = {c.qa_id for c in cases}
        served = self.store.serving(conversation_id, prompts, wanted, scoped_ok=scoped)
        if served is not None:
            return served.graph
        base = self.store.nearest(conversation_id, prompts, wanted)
        if base is not None and dict(base.prompts) == prompts:
            wanted |= base.qa_ids  # same prompts: re-answering the base's questions is free
            scoped = False
        # a cone is known only for questions the base graph answered
        scoped = scoped and base is not None and wanted <= base.qa_ids
        qas = tuple(q for q in conv.qa if q.id in wanted)
        job = GraphJob(conv, qas, dict(prompts), base.graph if base is not None else None,
                       tuple(sorted(wanted)) if scoped else None)
        return job, scoped

    def _trace(self, case: QACase, graph: MemoryGraph) -> CaseTrace:
        """The case's rollout; the graph was made to answer it, so a missing outcome raises (a defect, not a 0)."""
        qa = self._qa(case)
        out = read_judged_outcome(graph, qa.id)
        return CaseTrace(case, qa.question, qa.answer, out.prediction, float(out.score), out.label or out.reason, graph)

    def _attach_blame(self, traces: list[CaseTrace], prompts: dict[str, str]) -> None:
        assert self.attributor is not None
        sha = prompt_set_sha(prompts)
        todo: dict[str, list[CaseTrace]] = defaultdict(list)
        for t in traces:
            if not t.failed:
                continue
            key = (sha, t.case.qa_id)
            if key in self._blame:
                t.blame = self._blame[key]
            else:
                todo[t.case.conversation_id].append(t)
        for cid, group in todo.items():
            signals = self.attributor(group[0].graph, self.conversations[cid], [self._qa(t.case) for t in group])
            for t in group:
                t.blame = signals.get(t.case.qa_id)
                self._blame[(sha, t.case.qa_id)] = t.blame
