"""The keyword-memory example, end to end from the CLI with scripted LMs (no model): eval, attribute,
one round of optimize, report — through ``system.module`` and through an installed entry point."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from memtrace_opt.cli import main
from memtrace_opt.run.lms import Injected
from memtrace_opt.testing import ScriptedLM, judge_lm

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent


def keywords(messages, match) -> str:
    """Extraction: the message's capitalised words and numbers (what a model would call keywords)."""
    text = messages[-1]["content"].split(": ", 1)[-1]
    return ", ".join(re.findall(r"\b(?:[A-Z][a-z]+|\d+)\b", text)) or "none"


def answer(messages, match) -> str:
    """Answer: the first memory line, cut short — right when retrieval found the evidence first."""
    lines = [ln.split("] ", 1)[1] for ln in messages[-1]["content"].splitlines() if ln.startswith("- [")]
    return lines[0].split(": ", 1)[-1][:60] if lines else "Not mentioned"


def lms() -> dict:
    task = ScriptedLM([(r"most important keywords", keywords), (r"Question: ", answer)], model_id="scripted/kw")
    reflection = ScriptedLM([(r"Write ONE short general rule",
                              "If the step receives a question about a name, it should answer with the name only.")],
                            default="- Keep answers short.", model_id="scripted/kw-reflection")
    return {"task": task, "judge": judge_lm(), "reflection": reflection}


@pytest.fixture()
def config(tmp_path, monkeypatch) -> Path:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    cfg = yaml.safe_load((HERE / "config.yaml").read_text())
    cfg["output_dir"] = str(tmp_path / "runs")
    path = tmp_path / "keyword.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_example_runs_eval_attribute_optimize_and_report(config, tmp_path, capsys):
    run = tmp_path / "runs" / "keyword_memory"
    inj = Injected.of(lms())
    assert main(["eval", str(config), "--quiet"], injected=inj) == 0
    assert main(["attribute", str(run)], injected=inj) == 0
    assert main(["optimize", str(config), "--out", str(tmp_path / "opt")], injected=inj) == 0
    assert main(["report", str(run)], injected=inj) == 0
    graph_ops = (run / "graphs").glob("*.jsonl.gz")
    assert sorted(p.name for p in graph_ops) == ["mini-1.jsonl.gz", "mini-2.jsonl.gz"]
    blame = json.loads((run / "blame.json").read_text())
    assert blame["signals"] and blame["verification_failed"] == 0
    assert {s["prompt_component"] for s in blame["signals"]} <= {"keyword_extraction", "keyword_answer", None}
    final = json.loads((tmp_path / "opt" / "final.json").read_text())
    assert final["system"] == "keyword" and final["n"] == 6
    prompts = {p.stem for p in (tmp_path / "opt" / "prompts").glob("*.txt")}
    assert prompts == {"keyword_extraction", "keyword_answer"}  # its own answer prompt, no question_answering
    assert (run / "report.html").exists()


def test_an_unknown_system_lists_the_registered_ones(config, capsys):
    cfg = yaml.safe_load(config.read_text())
    cfg["system"] = {"name": "keywrd", "module": "keyword_memory.system"}
    config.write_text(yaml.safe_dump(cfg))
    assert main(["eval", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown memory system 'keywrd'; available: " in err and "keyword" in err


def test_an_installed_entry_point_registers_the_system(tmp_path):
    """A distribution on sys.path declaring the entry point: `systems` lists it, a config names it bare."""
    dist = tmp_path / "site" / "keyword_memory_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: keyword-memory-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[memtrace_opt.systems]\nkeyword = keyword_memory.system:KeywordMemory\n")
    env_path = f"{tmp_path / 'site'}:{EXAMPLES}"
    out = subprocess.run([sys.executable, "-m", "memtrace_opt.cli", "systems", "--json"], capture_output=True, text=True,
                         env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-1500:]
    listed = {s["name"]: s for s in json.loads(out.stdout)}
    assert listed["keyword"]["prompts"] == ["keyword_answer", "keyword_extraction"]
    assert listed["keyword"]["answer_op"] == "keyword.answer" and "keyword.search" in listed["keyword"]["ops_without_prompt"]

    cfg = yaml.safe_load((HERE / "config.yaml").read_text())
    cfg["system"] = {"name": "keyword", "settings": {"top_k": 4}}  # no module: the entry point finds it
    cfg["output_dir"] = str(tmp_path / "runs")
    config = tmp_path / "bare.yaml"
    config.write_text(yaml.safe_dump(cfg))
    code = ("import sys\n"
            "from memtrace_opt.cli import main\n"
            "from memtrace_opt.run.lms import Injected\n"
            "from keyword_memory.test_keyword_memory import lms\n"
            "run = sys.argv[2]\n"
            "inj = Injected(lms())\n"
            "codes = [main(['eval', sys.argv[1], '--quiet'], injected=inj), main(['attribute', run], injected=inj),\n"
            "         main(['optimize', sys.argv[1], '--out', run + '-opt'], injected=inj)]\n"
            "sys.exit(max(codes))\n")
    run = tmp_path / "runs" / "keyword_memory"
    done = subprocess.run([sys.executable, "-c", code, str(config), str(run)], capture_output=True, text=True,
                          env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-1500:]
    assert (run / "blame.json").exists() and json.loads((tmp_path / "runs" / "keyword_memory-opt" / "final.json")
                                                        .read_text())["system"] == "keyword"
