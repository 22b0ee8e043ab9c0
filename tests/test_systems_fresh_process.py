"""A fresh process that looks up a system can replay its answers (issue #12: counterfactual never ran)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memtrace_opt.errors import GraphError, UnknownOperationError
from memtrace_opt.graph.ops import get_spec


def test_looking_up_a_system_registers_the_shared_answer_op_in_a_fresh_process():
    code = ("from memtrace_opt.systems.registry import get_system; get_system('long_context'); "
            "from memtrace_opt.graph.ops import REGISTRY; print('qa.answer' in REGISTRY)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_an_unregistered_op_is_its_own_error_so_verification_cannot_swallow_it():
    with pytest.raises(UnknownOperationError, match="no operation registered as 'nope.op'"):
        get_spec("nope.op")
    assert issubclass(UnknownOperationError, GraphError)  # callers catching GraphError still see it
