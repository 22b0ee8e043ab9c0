"""``memtrace-opt init``: the shipped configs, written where a pip user can run them (memtrace_opt/examples.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtrace_opt.cli import main
from memtrace_opt.config import load_config
from memtrace_opt.errors import ConfigError
from memtrace_opt.examples import SHIPPED, list_examples, write_example

ROOT = Path(__file__).resolve().parents[1]


def test_every_shipped_config_is_the_source_trees_file_and_runs_on_the_mini_data():
    examples = list_examples()
    assert [e.name for e in examples] == list(SHIPPED)
    for example in examples:
        assert example.text == (ROOT / "experiments" / "configs" / f"{example.name}.yaml").read_text()
        config = load_config(ROOT / "experiments" / "configs" / f"{example.name}.yaml")
        assert config.dataset.name == "mini" and config.dataset.path is None, example.name
        assert example.summary.endswith(".") and "memtrace-opt" not in example.summary
    commands = {e.name: e.command for e in examples}
    assert commands == {"quickstart": "optimize", "long_context_mini": "eval", "rag_mini": "eval",
                        "mem0_mini": "eval", "evermemos_mini": "eval"}


def test_the_written_copy_differs_only_in_its_output_dir_and_header(tmp_path):
    example, path = write_example("quickstart", tmp_path / "here")
    assert path == tmp_path / "here" / "quickstart.yaml"
    written = path.read_text().splitlines()
    original = example.text.splitlines()
    assert written[0].startswith("# Written by `memtrace-opt init quickstart`")
    assert f"memtrace-opt optimize {path} --resume" in written[0]
    changed = [(a, b) for a, b in zip(original, written[1:]) if a != b]
    assert changed == [("output_dir: ../../runs", "output_dir: runs")] and len(written) == len(original) + 1
    config = load_config(path)
    assert Path(config.output_dir) == tmp_path / "here" / "runs"
    assert config.run_dir == tmp_path / "here" / "runs" / "quickstart"


def test_an_existing_file_is_kept_unless_forced(tmp_path):
    target = tmp_path / "mem0_mini.yaml"
    target.write_text("edited by the user\n")
    with pytest.raises(ConfigError, match="already exists; pass --force"):
        write_example("mem0_mini", tmp_path)
    assert target.read_text() == "edited by the user\n"
    write_example("mem0_mini", tmp_path, force=True)
    assert "output_dir: runs" in target.read_text()


def test_cli_lists_writes_and_refuses_in_one_line(tmp_path, capsys):
    assert main(["init", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in listed] == list(SHIPPED)

    assert main(["init", "rag_mini", "--dir", str(tmp_path), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written == {"path": str(tmp_path / "rag_mini.yaml"), "next": [f"memtrace-opt eval {tmp_path}/rag_mini.yaml"]}

    assert main(["init", "locomo_everything", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "locomo_everything" in err and "quickstart" in err
    assert main(["init", "rag_mini", "--dir", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
