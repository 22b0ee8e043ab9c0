"""The MIPROv2 baseline: DSPy's instruction optimizer, zero-shot (no demos), on the QA prompt.

MIPROv2 optimizes the instructions of ``dspy.Predict`` modules against an end-task metric. Of a
memory system's prompts only the question-answering one maps onto a predictor with a clear input
and a gold-scored output: ``(memories, question) -> answer``. So the baseline wraps that prompt as
the instructions of one ``Predict``, builds examples from the recorded graphs (each question's
retrieved memories, as the system showed them), runs MIPROv2 with
``max_bootstrapped_demos=0, max_labeled_demos=0`` (instruction-only; Optuna searches the
candidates) and writes the winning instruction back into the candidate.

What it cannot optimize: the ingestion prompts (fact extraction, memory-update decision,
boundary detection, memory extraction). Their outputs are intermediate structures with no gold
label, scored only through the whole pipeline; a DSPy program over them would have to re-run
ingestion per trial, which MIPROv2's per-example evaluation does not model. They stay unchanged
and :data:`MIPRO_COMPONENTS` says so.

Note the transfer: inside MIPROv2 the instruction is used through DSPy's chat adapter (field
markers), while the system's ``qa.answer`` op uses it as a plain system prompt. The loop therefore
re-scores the written-back candidate on validation through the real system before accepting it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from memtrace_opt.eval.judge import Judge
from memtrace_opt.lm.base import LMClient
from memtrace_opt.optimizers.adapter import MemoryPromptAdapter
from memtrace_opt.optimizers.cases import CaseTrace, QACase
from memtrace_opt.systems.base import QA_PROMPT

__all__ = ["MIPRO_COMPONENTS", "MiproOutcome", "build_examples", "qa_program", "run_miprov2"]

MIPRO_COMPONENTS: frozenset[str] = frozenset({QA_PROMPT})


@dataclass
class MiproOutcome:
    """The candidate with MIPROv2's instruction written back, and what the search cost."""

    best_candidate: dict[str, str]
    changed: list[str]
    metric_calls: int
    skipped: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"best_candidate": self.best_candidate, "changed": self.changed,
                "metric_calls": self.metric_calls, "skipped": self.skipped}


def qa_program(instructions: str) -> Any:
    """A one-predictor DSPy module whose instructions are the QA prompt."""
    import dspy

    class AnswerFromMemories(dspy.Signature):
        memories: str = dspy.InputField(desc="dated memories, one per line")
        question: str = dspy.InputField()
        answer: str = dspy.OutputField(desc="a short answer")

    class MemoryQA(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.answer = dspy.Predict(AnswerFromMemories.with_instructions(instructions))

        def forward(self, memories: str, question: str) -> Any:
            return self.answer(memories=memories, question=question)

    return MemoryQA()


def build_examples(traces: Sequence[CaseTrace], question_dates: dict[str, str | None]) -> list[Any]:
    """DSPy examples ``(memories, question) -> answer`` from each case's retrieved context."""
    import dspy

    from memtrace_opt.systems.qa import format_context

    examples = []
    for t in traces:
        version = t.graph.latest.get(f"retrieved:{t.case.qa_id}")
        context = t.graph.variables[f"retrieved:{t.case.qa_id}@{version}"].value if version else []
        when = question_dates.get(t.case.qa_id)
        question = f"{t.question} (asked on {when})" if when else t.question
        examples.append(dspy.Example(memories=format_context(context or []), question=question,
                                     answer=t.gold).with_inputs("memories", "question"))
    return examples


def run_miprov2(
    adapter: MemoryPromptAdapter,
    *,
    candidate: dict[str, str],
    trainset: Sequence[QACase],
    valset: Sequence[QACase],
    task_lm: LMClient,
    prompt_lm: LMClient,
    judge: Judge,
    num_candidates: int = 4,
    num_trials: int = 6,
    seed: int = 0,
) -> MiproOutcome:
    """Optimize the QA instruction of ``candidate`` with MIPROv2; other components are returned unchanged."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import dspy

    from memtrace_opt.lm.dspy_bridge import as_dspy_lm

    skipped = {c: "not expressible as a DSPy predictor with a gold-scored output" for c in candidate
               if c not in MIPRO_COMPONENTS}
    if QA_PROMPT not in candidate:
        return MiproOutcome(dict(candidate), [], 0, skipped)
    dates = _question_dates(adapter)
    train = build_examples(adapter.run(trainset, candidate), dates)
    val = build_examples(adapter.run(valset, candidate), dates)
    calls = {"n": 0}

    def metric(example: Any, pred: Any, trace: Any = None) -> float:
        calls["n"] += 1
        return float(judge.judge(example.question, example.answer, str(getattr(pred, "answer", "") or "")).score)

    optimizer = dspy.MIPROv2(
        metric=metric, prompt_model=as_dspy_lm(prompt_lm), task_model=as_dspy_lm(task_lm),
        max_bootstrapped_demos=0, max_labeled_demos=0, auto=None, num_candidates=num_candidates,
        num_threads=1, seed=seed, verbose=False, track_stats=False,
    )
    with dspy.context(lm=optimizer.task_model):
        compiled = optimizer.compile(
            qa_program(candidate[QA_PROMPT]), trainset=train, valset=val, num_trials=num_trials,
            minibatch=False, program_aware_proposer=False, data_aware_proposer=False,
            fewshot_aware_proposer=False, seed=seed,
        )
    instruction = compiled.predictors()[0].signature.instructions.strip()
    best = dict(candidate)
    changed = []
    if instruction and instruction != candidate[QA_PROMPT].strip():
        best[QA_PROMPT] = instruction
        changed.append(QA_PROMPT)
    return MiproOutcome(best, changed, calls["n"], skipped)


def _question_dates(adapter: MemoryPromptAdapter) -> dict[str, str | None]:
    return {qa.id: qa.question_date for conv in adapter.conversations.values() for qa in conv.qa}
