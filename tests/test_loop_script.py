"""experiments/scripts/run_compare.sh end to end, with the CLI wrapped to use the scripted LMs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_loop_compare import write_config

REPO = Path(__file__).resolve().parents[1]

WRAPPER = """
import sys
sys.path.insert(0, {repo!r})
from memtrace_opt.cli import main
from memtrace_opt.run.lms import Injected
from tests.test_loop_fixtures import ReflectionLM, TaskLM, accounted, conversations

task = accounted(TaskLM(conversations()), "task")
lms = {{"task": task, "judge": task, "reflection": accounted(ReflectionLM(), "reflection")}}
sys.exit(main(sys.argv[1:], injected=Injected(lms)))
"""


@pytest.mark.slow  # four CLI processes (~10 s); no model is loaded
def test_run_compare_script(tmp_path):
    config = write_config(tmp_path, "attributed")
    wrapper = tmp_path / "memtrace-opt"
    wrapper.write_text(f"#!{sys.executable}\n" + WRAPPER.format(repo=str(REPO)))
    wrapper.chmod(0o755)
    out_base = tmp_path / "cmp"
    env = {**os.environ, "MEMTRACE_OPT": str(wrapper)}
    script = REPO / "experiments" / "scripts" / "run_compare.sh"
    done = subprocess.run(["bash", str(script), str(config), str(out_base), "none", "attributed"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {r["method"]: r for r in json.loads((out_base / "compare.json").read_text())["rows"]}
    assert set(rows) == {"none", "attributed"}
    assert rows["attributed"]["gain"] == 1.0 and rows["none"]["gain"] == 0.0
