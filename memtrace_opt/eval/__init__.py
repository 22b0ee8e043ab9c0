"""Evaluation: mem0's LoCoMo metrics, judges, per-question results and their summaries.

Below the graph's users: the traced judge op scores each answer with a :class:`Judge`, and a failed
question (score 0) is what attribution blames and the loop tries to fix. Results are stored in the
run directory by :mod:`memtrace_opt.rundir`.
"""

from __future__ import annotations

from memtrace_opt.eval.judge import DeterministicJudge, HybridJudge, Judge, JudgeVerdict, LLMJudge
from memtrace_opt.eval.metrics import accuracy, bleu1, bootstrap_ci, by_category, paired_bootstrap, token_f1
from memtrace_opt.eval.results import QAResult, score_qa, summarize

__all__ = [
    "DeterministicJudge",
    "HybridJudge",
    "Judge",
    "JudgeVerdict",
    "LLMJudge",
    "QAResult",
    "accuracy",
    "bleu1",
    "bootstrap_ci",
    "by_category",
    "paired_bootstrap",
    "score_qa",
    "summarize",
    "token_f1",
]
