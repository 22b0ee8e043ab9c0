"""``memtrace-opt data stats`` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtrace_opt.cli import main

LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo10.json"


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo not present")
def test_stats_prints_the_locomo_counts(capsys):
    assert main(["data", "stats", "--dataset", "locomo", "--path", str(LOCOMO), "--json"]) == 0
    out = capsys.readouterr().out
    stats = json.loads(out)
    assert out.startswith('{\n  "dataset": "locomo"')
    assert (stats["conversations"], stats["sessions"], stats["turns"], stats["qa"], stats["qa_scored"]) == (
        10, 272, 5882, 1986, 1540)
    assert list(stats["qa_per_category"].values()) == [282, 321, 96, 841, 446]


def test_stats_on_the_bundled_mini_set(capsys):
    assert main(["data", "stats", "--dataset", "mini", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["qa"] == 54


def test_stats_prints_a_table_by_default(capsys):
    assert main(["data", "stats", "--dataset", "mini"]) == 0
    out = capsys.readouterr().out
    assert "mini dataset" in out and "qa_scored" in out and "single-hop: 18" in out


def test_bad_path_is_one_line_and_exit_2(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    assert main(["data", "stats", "--dataset", "locomo", "--path", str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and lines[0].startswith("memtrace-opt: dataset error")


def test_unknown_dataset_name_is_a_usage_error(capsys):
    assert main(["data", "stats", "--dataset", "nope"]) == 2
