"""Names that could collide or escape the run dir (issue #14, item 5)."""

from __future__ import annotations

import json

import pytest

from memtrace_opt import rundir as rd
from memtrace_opt.cli import main
from memtrace_opt.run.lms import Injected
from memtrace_opt.config import load_config
from memtrace_opt.data.locomo import load_locomo
from memtrace_opt.errors import ConfigError, DatasetError
from tests.scripted_lm import HashEmbedder
from tests.test_eval_cli import scripted, write_config


@pytest.mark.parametrize("name", ["..", ".", ".hidden"])
def test_a_run_name_of_dots_cannot_write_into_the_parent(tmp_path, name):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"run_name: '{name}'\nsystem: {{name: rag}}\n")
    with pytest.raises(ConfigError, match="run_name"):
        load_config(cfg)


def test_conversation_ids_that_escape_to_one_name_get_distinct_graph_files(tmp_path):
    paths = {cid: rd.graph_path(tmp_path, cid) for cid in ["c/1", "c_1", "c 1", "..", "conv-26"]}
    assert len(set(paths.values())) == 5
    assert paths["conv-26"].name == "conv-26.jsonl.gz" and paths["c_1"].name == "c_1.jsonl.gz"
    assert all(p.parent == tmp_path / "graphs" for p in paths.values())


def test_duplicate_locomo_sample_ids_are_rejected(tmp_path):
    conv = {"sample_id": "conv-1", "conversation": {"speaker_a": "A", "speaker_b": "B",
            "session_1_date_time": "1 May 2023", "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]},
            "qa": []}
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([conv, conv]))
    with pytest.raises(DatasetError, match=r"item 1.sample_id: duplicate id 'conv-1' \(also item 0\)"):
        load_locomo(path)


def test_eval_no_resume_leaves_no_old_graphs(tmp_path):
    cfg = write_config(tmp_path, "long_context")
    run = tmp_path / "out" / "t_long_context"
    stale = rd.graph_path(run, "old-conversation")
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    (run / "blame.json").write_text("{}")
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg), "--quiet", "--no-resume"], injected=inj) == 0
    assert sorted(p.name for p in rd.list_graphs(run)) == ["mini-1.jsonl.gz", "mini-2.jsonl.gz"]
    assert not (run / "blame.json").exists()


def test_out_pointing_at_a_file_is_one_line(tmp_path, capsys):
    cfg = write_config(tmp_path, "long_context")
    (tmp_path / "afile").write_text("x")
    for command in ("eval", "optimize"):
        assert main([command, str(cfg), "--out", str(tmp_path / "afile")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is a file; the run needs a directory there" in err


def test_report_of_a_dir_with_only_a_config_says_there_are_no_results(tmp_path, capsys):
    run = tmp_path / "r"
    run.mkdir()
    (run / "config.yaml").write_text("run_name: r\nsystem: {name: rag}\n")
    assert main(["report", str(run)]) == 2
    assert "no results here (only config.yaml)" in capsys.readouterr().err


def test_eval_honours_the_split_and_rejects_an_unknown_conversation(tmp_path, capsys):
    cfg = write_config(tmp_path, "long_context", extra="split: {optimize: [mini-2], heldout: [mini-9]}\n")
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg), "--quiet"], injected=inj) == 2
    assert "split.heldout: conversations ['mini-9'] are not in the selected dataset" in capsys.readouterr().err
    cfg = write_config(tmp_path, "long_context", extra="split: {optimize: [mini-2]}\n")
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg), "--quiet"], injected=inj) == 0
    assert [p.name for p in rd.list_graphs(tmp_path / "out" / "t_long_context")] == ["mini-2.jsonl.gz"]
