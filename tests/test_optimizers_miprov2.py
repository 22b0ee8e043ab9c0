"""The MIPROv2 baseline: instruction-only search on the QA prompt, written back into the candidate."""

from __future__ import annotations

import re

from memtrace_opt.eval.judge import DeterministicJudge
from memtrace_opt.lm.base import LMResult
from memtrace_opt.optimizers import MemoryPromptAdapter, cases_of
from memtrace_opt.optimizers.miprov2 import MIPRO_COMPONENTS, run_miprov2
from memtrace_opt.systems.base import QA_PROMPT
from tests.test_loop_fixtures import QA_MAGIC, SEED_QA, TaskLM, backend, conversations, seed_prompts

BETTER = f"Answer from the memories. Always {QA_MAGIC} before answering."


class DSPyScriptedLM:
    """Answers DSPy chat-adapter prompts: fills each output field named in the system message.

    ``answer``: the gold found in the memories when the instructions contain the magic words, else
    "Not mentioned"; ``proposed_instruction``: :data:`BETTER`; anything else: "ok".
    """

    model_id = "scripted/dspy"

    def __init__(self, convs) -> None:
        self.qa = TaskLM(convs)
        self.calls = 0

    def chat(self, messages, **kw):
        self.calls += 1
        system = messages[0]["content"]
        user = "\n".join(m["content"] for m in messages[1:])
        section = system.split("Your output fields are:", 1)[1].split("All interactions", 1)[0]
        fields = re.findall(r"`(\w+)`", section)
        parts = [f"[[ ## {f} ## ]]\n{self._value(f, system, user)}\n" for f in fields]
        text = "\n".join(parts) + "\n[[ ## completed ## ]]"
        return LMResult(text=text, model=self.model_id, prompt_tokens=len(user.split()), completion_tokens=5)

    def _value(self, field: str, system: str, user: str) -> str:
        if field == "answer":
            question = re.search(r"\[\[ ## question ## \]\]\n(.+?)(?: \(asked on .*\))?\n", user + "\n").group(1)
            memories = user.split("[[ ## question ## ]]")[0]
            return self.qa._answer(system, f"Memories:\n{memories}\nQuestion: {question}\n")
        if field == "proposed_instruction":
            return BETTER
        return "ok"


def test_miprov2_optimizes_only_the_qa_instruction():
    convs = conversations()
    adapter = MemoryPromptAdapter(backend(TaskLM(convs)), convs[:2], base_prompts=seed_prompts(),
                                  mode="answer_feedback")
    lm = DSPyScriptedLM(convs)
    candidate = {QA_PROMPT: SEED_QA, "fact_extraction": seed_prompts()["fact_extraction"]}
    outcome = run_miprov2(adapter, candidate=candidate, trainset=cases_of(convs[:1]), valset=cases_of(convs[1:2]),
                          task_lm=lm, prompt_lm=lm, judge=DeterministicJudge(), num_candidates=2, num_trials=2)
    assert outcome.changed == [QA_PROMPT] and outcome.best_candidate[QA_PROMPT] == BETTER
    assert outcome.best_candidate["fact_extraction"] == candidate["fact_extraction"]
    assert "fact_extraction" in outcome.skipped and outcome.metric_calls > 0
    assert MIPRO_COMPONENTS == {QA_PROMPT}
    assert adapter.run(cases_of(convs[1:2]), outcome.best_candidate)[0].score == 1.0  # transfers to the system


def test_miprov2_method_in_the_loop(tmp_path):
    from memtrace_opt.loop import run_loop
    from tests.test_loop_closed import make_ctx

    ctx, _, _ = make_ctx(tmp_path, "miprov2", rounds=1)
    lm = DSPyScriptedLM(conversations())
    ctx.task_lm = ctx.reflection_lm = lm
    ctx.plan = type(ctx.plan)(**{**ctx.plan.__dict__, "mipro_candidates": 2, "mipro_trials": 2})
    state = run_loop(ctx)
    assert state.rounds[0].optimized == [QA_PROMPT] and state.rounds[0].note == "miprov2"
    assert state.final["changed_components"] == [QA_PROMPT] and state.final["best_accuracy"] == 1.0
