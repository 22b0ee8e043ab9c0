"""The judge as a traced operation: ``eval.judge`` turns (question, gold, answer) into a judgement.

Judging inside the graph makes "which questions failed" a property of the graph itself
(``judgement:<qa id>`` with score 0), lets replay re-judge only the answers that changed, and puts
the judge's LM calls on the op that made them. The judge prompt is deliberately *not* a prompt
component: it is the yardstick, and an optimizer allowed to edit it could "improve" accuracy by
loosening the judge. Its text's hash is a param instead, so a code change to it invalidates memos.
"""

from __future__ import annotations

from typing import Any

from memtrace_opt.eval.judge import JUDGE_KINDS, JUDGE_PROMPT, JudgeVerdict, make_judge
from memtrace_opt.graph import New, OpContext, OpFailure, Tracer, Variable, operation
from memtrace_opt.graph.model import GOLD, JUDGE, JUDGEMENT
from memtrace_opt.graph.ops import prompt_sha
from memtrace_opt.lm.base import LMResult

__all__ = ["JUDGE_KINDS", "JUDGE_OP", "judge_answer", "judgement_value"]

JUDGE_OP = "eval.judge"


class _ContextLM:
    """An LMClient that routes the judge's calls through the op context (role ``judge``),
    so they are counted on the ``eval.judge`` op like any other op's calls."""

    def __init__(self, ctx: OpContext) -> None:
        self._ctx = ctx
        self.model_id = getattr(ctx.lms.get("judge"), "model_id", "judge")

    def chat(self, messages: list[dict[str, str]], **kw: Any) -> LMResult:
        return self._ctx.chat(messages, role="judge", **kw)


def judgement_value(verdict: JudgeVerdict) -> dict[str, Any]:
    """What a ``judgement:<qa id>`` variable holds."""
    return {"score": int(verdict.score), "label": verdict.label, "reason": verdict.reason}


@operation(JUDGE_OP, category=JUDGE)
def _judge(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Score the answer against the gold; an unreadable judge reply is a failed op scoring 0."""
    judge = make_judge(params.get("judge", "llm"), _ContextLM(ctx))
    verdict = judge.judge(inputs["question"], inputs["gold"], inputs["answer"] or "")
    value = judgement_value(verdict)
    if verdict.failed:
        raise OpFailure(verdict.reason, fallback={"judgement": value}, raw=verdict.raw)
    return {"judgement": value}


def judge_answer(tracer: Tracer, qa: Any, question: Variable, answer: Variable, *, judge: str = "llm",
                 gold: str | None = None) -> Variable:
    """Record ``gold:<qa id>`` and judge ``answer`` in the question's ``answer:<qa id>`` session.

    Returns the ``judgement:<qa id>`` variable (``{"score", "label", "reason"}``).
    """
    if judge not in JUDGE_KINDS:
        raise ValueError(f"judge must be one of {JUDGE_KINDS}, got {judge!r}")
    params: dict[str, Any] = {"judge": judge}
    if judge in ("llm", "hybrid"):
        params["judge_prompt_sha"] = prompt_sha(JUDGE_PROMPT)
    with tracer.session(f"answer:{qa.id}", kind="answer", qa_id=qa.id):
        gold_var = tracer.variable(f"gold:{qa.id}", qa.answer if gold is None else gold, category=GOLD)
        return tracer.call(
            JUDGE_OP,
            inputs={"question": question, "gold": gold_var, "answer": answer},
            params=params,
            outputs={"judgement": New(f"judgement:{qa.id}", JUDGEMENT)},
        )["judgement"]
