"""``memtrace-opt eval`` and ``memtrace-opt systems`` on the mini dataset with scripted LMs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtrace_opt import rundir as rd
from memtrace_opt.cli import main
from memtrace_opt.run.lms import Injected
from memtrace_opt.config import load_config
from tests.scripted_lm import HashEmbedder, ScriptedLM, judge_lm

CONFIGS = Path(__file__).resolve().parents[1] / "experiments" / "configs"


def write_config(tmp_path: Path, system: str = "rag", extra: str = "") -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(f"""run_name: t_{system}
output_dir: out
dataset:
  name: mini
  conversations: [mini-1, mini-2]
  max_questions: 2
system:
  name: {system}
  settings: {{top_k: 3}}
eval:
  judge: llm
{extra}""")
    return path


def scripted():
    task = ScriptedLM([(r"Question: .*cat", "Biscuit")], default="Not mentioned")
    return {"task": task, "judge": judge_lm()}


@pytest.mark.parametrize("system", ["long_context", "rag"])
def test_eval_writes_the_run_dir_and_prints_a_table(tmp_path, capsys, system):
    cfg = write_config(tmp_path, system)
    roles = scripted()
    inj = Injected.of(roles, resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg)] + (["--quiet"] if system == "rag" else []), injected=inj) == 0  # with and without a bar
    out = capsys.readouterr().out
    run = tmp_path / "out" / f"t_{system}"
    assert {p.name for p in run.iterdir()} >= {"config.yaml", "graphs", "results.json", "summary.json", "usage.json"}
    assert sorted(p.name for p in rd.list_graphs(run)) == ["mini-1.jsonl.gz", "mini-2.jsonl.gz"]
    results = rd.read_results(run)
    assert len(results) == 4 and results[0].qa_id == "mini-1/q0" and results[0].judge_score == 1
    summary = rd.read_summary(run)
    assert summary["n"] == 4 and summary["accuracy"] == 0.25 and summary["lm_usage"]["lm_calls"] == 8
    assert load_config(run / "config.yaml").system.name == system
    assert rd.read_graph(run, "mini-1").meta["settings"]["top_k"] == 3
    assert "accuracy" in out and "LM calls 8" in out and str(run) in out.replace("\n", "")
    assert roles["task"].n_calls == 4


def test_eval_resumes_and_refuses_a_different_config(tmp_path, capsys):
    cfg = write_config(tmp_path)
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg), "--quiet"], injected=inj) == 0
    again = scripted()
    inj = Injected.of(again, resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg), "--quiet"], injected=inj) == 0
    assert again["task"].n_calls == 0 and "resumed: mini-1, mini-2" in capsys.readouterr().out
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg), "--quiet", "--json"], injected=inj) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)  # --json: stdout holds the summary and nothing else
    assert summary["n"] == 4 and 0.0 <= summary["accuracy"] <= 1.0 and Path(summary["run_dir"]).is_dir()
    assert "resumed: mini-1, mini-2" in captured.err and captured.err.rstrip().splitlines()[-1].startswith("eval: 4 questions")
    changed = write_config(tmp_path, extra="seed: 7\n")
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(changed), "--quiet"], injected=inj) == 2
    assert "holds a run of a different config" in capsys.readouterr().err
    assert main(["eval", str(changed), "--quiet", "--no-resume"], injected=inj) == 0


def test_resuming_with_another_executor_is_the_same_run(tmp_path, capsys):
    """How a run executes (executor.workers) never changes its results: resuming with it changed is allowed."""
    cfg = write_config(tmp_path)
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg), "--quiet"], injected=inj) == 0
    more = write_config(tmp_path, extra="executor: {workers: 2}\n")
    again = scripted()
    inj = Injected.of(again, resources={"embedder": HashEmbedder()})
    assert main(["eval", str(more), "--quiet"], injected=inj) == 0
    assert again["task"].n_calls == 0 and "resumed: mini-1, mini-2" in capsys.readouterr().out


def test_eval_out_and_dataset_path_options(tmp_path):
    from memtrace_opt.data.mini import bundled_path

    cfg = write_config(tmp_path)
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg), "--quiet", "--out", str(tmp_path / "elsewhere"),
                 "--dataset-path", str(bundled_path())], injected=inj) == 0
    assert len(rd.read_results(tmp_path / "elsewhere")) == 4
    assert load_config(tmp_path / "elsewhere" / "config.yaml").dataset.path == str(bundled_path())


@pytest.mark.parametrize("body, field", [
    ("run_name: x\nsystem: {name: rag, settings: {chunk_size: 3}}\n", "system.settings.chunk_size"),
    ("run_name: x\nsystem: {name: nope}\n", "system.name"),
    ("run_name: x\nsystem: {name: rag, prompts: {bogus: hi}}\n", "system.prompts.bogus"),
])
def test_bad_config_is_one_line_and_exit_2(tmp_path, capsys, body, field):
    path = tmp_path / "bad.yaml"
    path.write_text(body + "output_dir: out\ndataset: {name: mini, max_questions: 1}\n")
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(path), "--quiet"], injected=inj) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"memtrace-opt: config error in {path}: {field}") and "\n" not in err


def test_missing_dataset_file_is_one_line_and_exit_2(tmp_path, capsys):
    cfg = write_config(tmp_path)
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg), "--quiet", "--dataset-path", str(tmp_path / "nope.json")], injected=inj) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("memtrace-opt: dataset error") and "nope.json" in err and "\n" not in err
    assert not (tmp_path / "out").exists()  # nothing written before the data loaded


def test_missing_config_file_exit_2(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "none.yaml")]) == 2
    assert "file not found" in capsys.readouterr().err


def test_systems_command_lists_prompts_and_settings(capsys):
    assert main(["systems"]) == 0
    table = capsys.readouterr().out
    assert "memory systems" in table and "fact_extraction" in table
    assert main(["systems", "--json"]) == 0
    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    assert listed["rag"]["prompts"] == ["question_answering"] and listed["rag"]["settings"]["chunk_tokens"] == 256
    assert listed["long_context"]["settings"]["context_tokens"] == 4000


def test_shipped_configs_load():
    for system in ("long_context", "rag", "mem0", "evermemos"):
        for data in ("mini", "locomo"):
            cfg = load_config(CONFIGS / f"{system}_{data}.yaml")
            assert cfg.system.name == system and cfg.dataset.name == data
            if data == "locomo":
                assert cfg.dataset.conversations == ["conv-26"] and cfg.dataset.max_sessions == 3


def test_quickstart_split_has_questions_enough_to_select_and_to_hold_out():
    """Six validation questions could never tell a candidate from the seed: the quickstart selects on
    at least 12 and holds out at least 24, on disjoint conversations of the bundled mini set."""
    from memtrace_opt.data import load_dataset

    cfg = load_config(CONFIGS / "quickstart.yaml")
    per_conversation = {c.id: len(c.qa) for c in load_dataset("mini").conversations}
    split = cfg.split
    assert split is not None
    roles = (split.optimize, split.validation, split.heldout)
    assert len({c for role in roles for c in role}) == sum(len(role) for role in roles)
    assert sum(per_conversation[c] for c in split.validation) >= 12
    assert sum(per_conversation[c] for c in split.heldout) >= 24
