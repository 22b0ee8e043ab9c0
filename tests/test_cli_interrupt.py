"""Ctrl-C is never a success: exit 130 and one line saying the work is checkpointed (issue #14, item 1)."""

from __future__ import annotations

import memtrace_opt.data as data
from memtrace_opt.cli import INTERRUPTED, main


def test_an_interrupted_command_exits_130_and_says_so(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(data, "load_dataset", interrupted)
    assert main(["data", "stats", "--dataset", "mini"]) == INTERRUPTED == 130
    assert "interrupted; finished work is checkpointed, rerun with --resume" in capsys.readouterr().err


def test_a_normal_command_still_exits_0(capsys):
    assert main(["data", "stats", "--dataset", "mini"]) == 0
    assert '"conversations": 2' in capsys.readouterr().out
