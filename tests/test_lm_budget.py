"""The per-replay LM call cap: shared over roles, cache hits counted, None means no cap."""

from __future__ import annotations

import pytest

from memtrace_opt.lm.budget import CallBudgetExceeded, with_call_budget
from tests.scripted_lm import ScriptedLM


def test_budget_is_shared_over_roles_and_raises_past_the_limit():
    lms = {"task": ScriptedLM([(r".", "a")]), "judge": ScriptedLM([(r".", "b")])}
    capped = with_call_budget(lms, 2)
    assert capped["task"].chat([{"role": "user", "content": "x"}]).text == "a"
    assert capped["judge"].chat([{"role": "user", "content": "x"}]).text == "b"
    with pytest.raises(CallBudgetExceeded, match="budget of 2 LM calls"):
        capped["task"].chat([{"role": "user", "content": "x"}])
    assert with_call_budget(lms, None) is lms
    assert capped["task"].model_id == lms["task"].model_id
