"""``memtrace-opt attribute`` and ``memtrace-opt bench-attribution`` on the mini dataset with scripted LMs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memtrace_opt.attribution.text import content_tokens
from memtrace_opt.cli import main
from memtrace_opt.run.lms import Injected
from memtrace_opt.lm.base import LMResult
from tests.scripted_lm import HashEmbedder, ScriptedLM, judge_lm


def reader(messages, match):
    """Answers with the memory line sharing most words with the question (or abstains)."""
    text = messages[-1]["content"]
    question = re.search(r"Question: (.*?)\n", text)[1]
    lines = [ln.split("] ", 1)[1] for ln in text.splitlines() if ln.startswith("- [")]
    best = max(lines, key=lambda ln: len(content_tokens(ln) & content_tokens(question)), default="")
    return best[:200] if best and content_tokens(best) & content_tokens(question) else "Not mentioned"


class GuessLM:
    """An attribution LM that always blames a ResponseError on an op it cannot name."""

    model_id = "scripted/guess"

    def chat(self, messages, **kw):
        self.calls = getattr(self, "calls", 0) + 1
        return LMResult('{"reason": "guess", "op_id": "?", "error_type": "ResponseError", "decisive": true, '
                        '"first_half": true, "holds": true}', self.model_id, 20, 5)


def lms():
    return {"task": ScriptedLM([(r"Question: ", reader)]), "judge": judge_lm(), "attribution": GuessLM()}


RESOURCES = {"embedder": HashEmbedder()}


def write_config(tmp_path: Path, system: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(f"run_name: t\noutput_dir: out\ndataset:\n  name: mini\n  conversations: [mini-1, mini-2]\nsystem:\n  name: {system}\n"
                    "  settings: {top_k: 2}\neval:\n  judge: llm\n")
    return path


@pytest.fixture(scope="module")
def rag_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rag")
    inj = Injected.of(lms(), resources=RESOURCES)
    assert main(["eval", str(write_config(tmp, "rag")), "--quiet"], injected=inj) == 0
    return tmp / "out" / "t"


def failed_ids(run: Path) -> list[str]:
    results = json.loads((run / "results.json").read_text())["results"]
    return sorted(r["qa_id"] for r in results if r["judge_score"] == 0)


def test_attribute_writes_blame_json_for_every_failed_question(rag_run, capsys):
    inj = Injected.of(lms(), resources=RESOURCES)
    assert main(["attribute", str(rag_run)], injected=inj) == 0
    payload = json.loads((rag_run / "blame.json").read_text())
    signals = payload["signals"]
    assert sorted(s["case_id"] for s in signals) == failed_ids(rag_run)
    assert payload["method"] == "tracing" and payload["counterfactual"] is True
    assert {s["error_type"] for s in signals} <= {"ResponseError", "RetrievalError", "ExtractionError"}
    retrieval = [s for s in signals if s["error_type"] == "RetrievalError"]
    assert retrieval and all(s["prompt_component"] is None and s["counterfactual_rescued"] is not None for s in retrieval)
    agg = payload["aggregate"]
    assert agg["total"] == len(signals)
    assert agg["unoptimizable"]["count"] == len(retrieval)
    # blame no prompt can fix names its op and the setting that governs it
    assert agg["unoptimizable"]["ops"] == {"rag.retrieve": len(retrieval)}
    assert agg["unoptimizable"]["settings"] == {"rag.retrieve": ["top_k"]}
    assert sum(g["count"] for g in agg["components"].values()) + agg["unoptimizable"]["count"] == len(signals)
    captured = capsys.readouterr()
    assert "blame (tracing, counterfactual)" in captured.out and "question_answering" in captured.out
    assert "failed question(s), verifying by replay" in captured.err  # a progress line per conversation
    assert (f"{len(retrieval)} failure(s) on steps no prompt controls: rag.retrieve {len(retrieval)} (setting top_k)"
            in captured.out)


def test_attribute_quiet_prints_no_progress(rag_run, capsys):
    inj = Injected.of({}, resources=RESOURCES)
    assert main(["attribute", str(rag_run), "--no-counterfactual", "--quiet"], injected=inj) == 0
    assert "attributing" not in capsys.readouterr().err


def test_attribute_without_counterfactual_needs_no_lm(rag_run):
    inj = Injected.of({}, resources=RESOURCES)
    assert main(["attribute", str(rag_run), "--no-counterfactual", "--json"], injected=inj) == 0
    payload = json.loads((rag_run / "blame.json").read_text())
    assert payload["counterfactual"] is False
    assert all(s["counterfactual_rescued"] is None and s["cost"]["replays"] == 0 for s in payload["signals"])


def test_attribute_with_a_baseline_method(rag_run):
    inj = Injected.of(lms(), resources=RESOURCES)
    assert main(["attribute", str(rag_run), "--method", "all_at_once"], injected=inj) == 0
    signals = json.loads((rag_run / "blame.json").read_text())["signals"]
    assert signals and all(s["method"] == "all_at_once" and s["error_type"] == "ResponseError" for s in signals)
    assert all(s["op_id"] is None and s["cost"]["llm_calls"] == 1 for s in signals)


def test_attribute_with_the_llm_content_judge(rag_run):
    roles = lms()
    inj = Injected.of(roles, resources=RESOURCES)
    assert main(["attribute", str(rag_run), "--no-counterfactual", "--llm-content"], injected=inj) == 0
    payload = json.loads((rag_run / "blame.json").read_text())
    assert payload["method"] == "tracing+llm" and len(payload["signals"]) == len(failed_ids(rag_run))
    calls = sum(s["cost"]["llm_calls"] for s in payload["signals"])
    assert calls == getattr(roles["attribution"], "calls", 0)  # only grey-zone content checks reach the LM


def test_attribute_errors_are_one_line(tmp_path, capsys):
    assert main(["attribute", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no graphs" in err and err.count("\n") == 1
    assert main(["attribute", str(tmp_path), "--evidence", "nope"]) == 2


def test_bench_attribution_json_rows_and_export(tmp_path, capsys):
    cfg = write_config(tmp_path, "rag")
    inj = Injected.of(lms(), resources=RESOURCES)
    code = main(["bench-attribution", str(cfg), "--systems", "rag,long_context", "--max-cases", "10",
                 "--methods", "tracing,tracing+cf,flat_log", "--json"], injected=inj)
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in payload["rows"]] == ["tracing", "tracing+cf", "flat_log"]
    assert set(payload["case_counts"]) == {"rag", "long_context"} and payload["cases"] >= 10
    tracing = payload["rows"][0]
    assert set(tracing["by_source"]) >= {"injected"} and tracing["by_source"]["injected"]["type_accuracy"] >= 0.8
    assert payload["rows"][2]["llm_calls_per_case"] == 1.0
    assert "rag/UpdateError" in payload["skipped"]  # RAG never updates a unit: said, not hidden
    assert payload["pseudo_evidence_recall"]["n"] > 0 and 0 <= payload["pseudo_evidence_recall"]["mean"] <= 1
    run = tmp_path / "out" / "t"
    assert json.loads((run / "attribution_bench.json").read_text())["cases"] == payload["cases"]
    exported = list((run / "attribution_bench").glob("*/*.jsonl.gz"))
    assert {p.parent.name for p in exported} == {"rag", "long_context"}


def test_bench_attribution_rejects_unknown_systems(tmp_path, capsys):
    assert main(["bench-attribution", str(write_config(tmp_path, "rag")), "--systems", "nope"]) == 2
    assert "unknown value 'nope'" in capsys.readouterr().err


def test_bench_attribution_pools_cases_from_several_configs(tmp_path, capsys):
    """Two dataset slices in one benchmark: cases from both, the first config's run dir and models."""
    first, second = tmp_path / "a", tmp_path / "b"
    for path, conv in ((first, "mini-1"), (second, "mini-2")):
        path.mkdir()
        (path / "run.yaml").write_text(f"run_name: t\noutput_dir: out\ndataset:\n  name: mini\n  conversations: [mini-1, mini-2]\n"
                                       f"  conversations: [{conv}]\nsystem:\n  name: rag\n"
                                       "  settings: {top_k: 2}\neval:\n  judge: llm\n")
    inj = Injected.of(lms(), resources=RESOURCES)
    code = main(["bench-attribution", str(first / "run.yaml"), str(second / "run.yaml"), "--max-cases", "40",
                 "--methods", "tracing", "--json"], injected=inj)
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["config"]["datasets"] == ["mini[mini-1]", "mini[mini-2]"]
    exported = list((first / "out" / "t" / "attribution_bench" / "rag").glob("*.jsonl.gz"))
    assert {p.name.split("__")[0] for p in exported} == {"mini-1", "mini-2"}
    assert not (second / "out").exists()


@pytest.mark.parametrize(("flag", "many"), [([], False), (["--full-replay"], True)])
def test_bench_attribution_replays_one_question_unless_told(tmp_path, capsys, flag, many):
    from memtrace_opt.graph.io_json import load_json

    cfg = write_config(tmp_path, "long_context")
    inj = Injected.of(lms(), resources=RESOURCES)
    assert main(["bench-attribution", str(cfg), "--max-cases", "5", "--max-real", "0", "--methods", "tracing",
                 "--json", *flag], injected=inj) == 0
    capsys.readouterr()
    exported = list((tmp_path / "out" / "t" / "attribution_bench" / "long_context").glob("*.jsonl.gz"))
    answered = {len([s for s in load_json(p).sessions if s.startswith("answer:")]) for p in exported}
    assert exported and (min(answered) > 1 if many else answered == {1})


def test_bench_attribution_skips_injections_over_the_replay_budget(tmp_path, capsys):
    """A replay cap of one LM call: RAG's re-answer plus re-judge needs two, so those injections are skipped."""
    cfg = write_config(tmp_path, "rag")
    inj = Injected.of(lms(), resources=RESOURCES)
    assert main(["bench-attribution", str(cfg), "--max-cases", "10", "--max-real", "0", "--methods", "tracing",
                 "--max-replay-calls", "1", "--json"], injected=inj) == 0
    payload = json.loads(capsys.readouterr().out)
    reasons = {why for per_type in payload["skipped"].values() for why in per_type}
    assert "replay over the LM-call budget" in reasons
    assert payload["config"]["max_replay_calls"] == 1


def test_a_failed_verification_is_an_error_line_and_counted_never_silent(rag_run, capsys, monkeypatch):
    import memtrace_opt.attribution.counterfactual as cf

    def broken_replay(*args, **kwargs):
        raise RuntimeError("replay exploded")

    monkeypatch.setattr(cf, "replay", broken_replay)
    inj = Injected.of(lms(), resources=RESOURCES)
    assert main(["attribute", str(rag_run)], injected=inj) == 1
    payload = json.loads((rag_run / "blame.json").read_text())
    err = capsys.readouterr().err
    assert payload["verification_failed"] >= 1
    assert err.count("counterfactual verification of") == payload["verification_failed"]
    assert "replay exploded" in err and "verification(s) failed" in err


def test_attribute_in_a_fresh_process_verifies_every_blame(rag_run):
    """A real `memtrace-opt attribute` process: every verifiable blame gets a boolean verdict, none fails."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from memtrace_opt.run.lms import Injected\n"
        "from tests.test_attribution_cli import lms, RESOURCES\n"
        "from memtrace_opt.cli import main\n"
        f"sys.exit(main(['attribute', {str(rag_run)!r}, '--json'], injected=Injected(lms(), RESOURCES)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-2000:]
    payload = json.loads(out.stdout)
    assert payload["verification_failed"] == 0
    verifiable = [s for s in payload["signals"] if s["error_type"] in ("RetrievalError", "ExtractionError")]
    assert verifiable and all(isinstance(s["counterfactual_rescued"], bool) for s in verifiable)
