"""Ctrl-C is never a success: exit 130 and one line saying the work is checkpointed (issue #14, item 1)."""

from __future__ import annotations

import memtrace_opt.data as data
from memtrace_opt.cli import INTERRUPTED, main


def test_an_interrupted_command_exits_130_and_says_so(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(data, "load_dataset", interrupted)
    assert main(["data", "stats", "--dataset", "mini"]) == INTERRUPTED == 130
    assert "interrupted; finished work is checkpointed, rerun the same command to resume" in capsys.readouterr().err


def test_a_normal_command_still_exits_0(capsys):
    assert main(["data", "stats", "--dataset", "mini", "--json"]) == 0
    assert '"conversations": 9' in capsys.readouterr().out


def test_sigint_to_a_real_process_exits_130(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    ready = tmp_path / "ready"
    code = (
        # A shell's background job (`make test &`, some CI runners) starts children with SIGINT ignored;
        # an interactive Ctrl-C reaches Python's own handler, which is what this test is about.
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import pathlib, time, memtrace_opt.data as d\n"
        "def slow(*a, **k):\n"
        f"    pathlib.Path({str(ready)!r}).write_text('x'); time.sleep(60)\n"
        "d.load_dataset = slow\n"
        "from memtrace_opt.cli import main\n"
        "raise SystemExit(main(['data', 'stats', '--dataset', 'mini']))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "interrupted; finished work is checkpointed, rerun the same command to resume" in err
