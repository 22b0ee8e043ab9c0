"""The HTML report of a small traced run: content, structure, escaping, missing and broken sections, CLI."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from memtrace_opt.cli import main
from memtrace_opt.errors import DatasetError
from memtrace_opt.report import collect_run, render_report
from memtrace_opt.report.page import CSP
from tests.test_report_support import CONV, FAILED, IMG, SCRIPT, build_toy_run


class Elements(HTMLParser):
    """Counts elements and collects attribute names, the way a browser's tokenizer sees the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.attrs: set[str] = set()
        self.script_types: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.attrs |= {name for name, _ in attrs}
        if tag == "script":
            self.script_types.append(dict(attrs).get("type"))


def parse(text: str) -> Elements:
    p = Elements()
    p.feed(text)
    return p


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_toy_run(tmp_path_factory.mktemp("report") / "run")


@pytest.fixture(scope="module")
def html(run_dir: Path) -> str:
    return render_report(run_dir).read_text(encoding="utf-8")


def test_writes_one_self_contained_file(run_dir: Path, html: str) -> None:
    assert (run_dir / "report.html").exists()
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)  # nothing from the network
    assert "@import" not in html and "url(http" not in html
    assert f'content="{CSP}"' in html and "script-src 'sha256-" in CSP


def test_summary_numbers(html: str) -> None:
    header = html[html.index('<header class="top">'): html.index("</header>")]
    assert "25.0%" in header  # 1 of 4 correct
    assert ">3<" in header and "of 4 scored · 3 attributed" in header
    assert "qwen-1.5b (embedded)" in header and "qwen-0.5b (embedded)" in header
    assert "system <b>toy</b>" in header
    assert "LLM calls" in header and ">8<" in header
    summary = html[html.index('id="summary"'): html.index('id="failures"')]
    assert "single-hop" in summary and "knowledge-update" in summary and "ci-bar" in summary


def test_one_graph_per_failed_question(html: str) -> None:
    assert html.count('<svg class="slice"') == len(FAILED) == 3
    assert html.count("<details class='q'") == 3
    for qa in FAILED:
        assert f"evolution graph of {qa}" in html


def test_blamed_op_is_highlighted_with_its_error_type(html: str) -> None:
    blamed = re.findall(r'<g class="node operation[^"]*\bblamed\b[^"]*" data-id="([^"]+)"', html)
    assert blamed == ["ingest:s2/toy.delete#0", "ingest:s2/toy.store#0", f"answer:{CONV}/q3/toy.answer#0"]
    assert "✗ DeletionError" in html and "✗ UpdateError" in html and "✗ ResponseError" in html
    assert html.count('class="edge blamed') >= 3
    assert "✓ counterfactual: correcting this op rescues the answer" in html
    assert "✗ counterfactual: correcting this op alone did not rescue the answer" in html
    assert "counterfactual: 1 replay(s), no single-op fix to test" in html  # the ResponseError was replayed


def test_unit_lifetime_shows_the_deletion(html: str) -> None:
    card = html[html.index(f"{CONV}/q1"):html.index(f"{CONV}/q2")]
    assert "Life of memory unit <code>mem:2</code>" in card
    assert "v1 created" in card and "v2 updated" in card and "v3 deleted" in card


def test_prompt_diff_lines_are_coloured(html: str) -> None:
    section = html[html.index("id='optimization'"):]
    assert '<span class="dl del"><span class="sign">-</span>Use the memories.</span>' in section
    added = '<span class="dl add"><span class="sign">+</span>Use the <ins>newest </ins>memories<ins> first</ins>'
    assert added in section
    assert "Never echo &lt;script&gt;alert(1)&lt;/script&gt;." in section
    assert "<code>answer</code> <span class='plus'>+2</span> <span class='minus'>−1</span>" in section
    assert "<code>extract</code>" not in section  # unchanged prompts are not listed


def test_optimization_rounds_and_final(html: str) -> None:
    section = html[html.index("id='optimization'"):html.index("id='bench'")]
    assert '<svg class="chart line"' in section and section.count("<circle") == 3
    assert "held-out accuracy <b>25.0% → 50.0%</b>" in section and "stopped: all 2 rounds done" in section
    assert "+50.0 pp" in section  # 25% → 75% on validation


def test_error_distribution_charts(html: str) -> None:
    section = html[html.index("id='errors'"):html.index("id='optimization'")]
    assert section.count('<svg class="chart bars"') == 4  # system, op, prompt component, round
    for label in ("toy.delete", "toy.store", "toy.answer", "no prompt (unoptimizable)", "round 1"):
        assert label in section
    assert "#CC79A7" in section  # DeletionError's colour, the same as its chip in the cards
    assert "--c:#CC79A7" in html[html.index("id=\"failures\""):]


def test_benchmark_table(html: str) -> None:
    section = html[html.index("id='bench'"):]
    assert "type accuracy per system" in section and "op accuracy per system" in section
    assert "<td class='n best'>80.0%</td>" in section
    assert "all systems" in section and "benchmark cases per system" in section


def test_untrusted_text_renders_as_text(html: str) -> None:
    assert SCRIPT not in html and IMG not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    elements = parse(html)
    assert elements.tags.get("img", 0) == 0
    assert "onerror" not in elements.attrs
    assert sorted(map(str, elements.script_types)) == ["None", "application/json"]  # ours only


def test_json_blob_cannot_close_its_script(tmp_path: Path) -> None:
    root = build_toy_run(tmp_path / "run")
    rd_results = json.loads((root / "results.json").read_text())
    rd_results["results"][1]["qa_id"] = "</script><script>alert(2)</script><!--"
    (root / "results.json").write_text(json.dumps(rd_results))
    html = render_report(root).read_text()
    blob = html[html.index('<script type="application/json"'):]
    blob = blob[: blob.index("</script>")]
    assert "<script>alert(2)" not in html and "<!--" not in blob
    assert "\\u003c/script\\u003e" in blob
    assert parse(html).tags["script"] == 2


def test_missing_sections_are_omitted(tmp_path: Path, run_dir: Path) -> None:
    root = tmp_path / "eval-only"
    shutil.copytree(run_dir, root, ignore=shutil.ignore_patterns(
        "blame.json", "checkpoint.json", "final.json", "rounds", "prompts", "attribution_bench.json", "report.html"))
    html = render_report(root).read_text()
    for anchor in ("errors", "optimization", "bench"):
        assert f"id='{anchor}'" not in html and f'href="#{anchor}"' not in html
    assert html.count('<svg class="slice"') == 3  # failures still drawn, not attributed
    assert "Not attributed" in html


def test_unreadable_file_becomes_a_note(tmp_path: Path, run_dir: Path) -> None:
    root = tmp_path / "broken"
    shutil.copytree(run_dir, root)
    (root / "summary.json").write_text("{not json")
    data = collect_run(root)
    assert any(n.startswith("summary.json: could not be read") for n in data.notes)
    html = render_report(root).read_text()
    assert "id='notes'" in html and "summary.json: could not be read" in html


def test_missing_or_empty_run_dir_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="run directory not found"):
        render_report(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no results here"):
        render_report(tmp_path / "empty")


def test_graph_cap_lists_the_rest_without_drawing(tmp_path: Path, run_dir: Path) -> None:
    html = render_report(run_dir, tmp_path / "r.html", max_graphs=1).read_text()
    assert html.count('<svg class="slice"') == 1 and html.count("<details class='q'") == 3
    assert "Graphs are drawn for the first 1; 2 more are listed without one." in html


def test_cli_writes_report(tmp_path: Path, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.html"
    assert main(["report", str(run_dir), "--out", str(out), "--max-nodes", "12"]) == 0
    assert out.exists() and "3 failed questions, 3 blamed" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "run directory not found" in capsys.readouterr().err


def test_compare_adds_other_runs_to_the_round_chart(tmp_path: Path, run_dir: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    html = render_report(run_dir, tmp_path / "c.html", compare=[other]).read_text()
    section = html[html.index("id='optimization'"):]
    assert 'data-method="attributed"' in section and 'data-method="attributed (other)"' in section


def test_report_of_a_real_loop_run(tmp_path: Path) -> None:
    """The closed loop's own files (checkpoint, rounds/, prompts/, final.json) on its fixture system."""
    from memtrace_opt.loop import LoopContext, LoopData, LoopPlan, run_loop
    from memtrace_opt.loop.blaming import make_attributor
    from memtrace_opt.systems.base import QA_PROMPT
    from tests.test_loop_fixtures import QA_MAGIC, SEED_QA, ReflectionLM, TaskLM, accounted, backend, conversations

    convs = conversations()
    ctx = LoopContext(
        backend=backend(TaskLM(convs, extract_magic=QA_MAGIC)), data=LoopData(tuple(convs[:1]), tuple(convs[1:2]),
                                                                             tuple(convs[2:])),
        plan=LoopPlan(method="attributed", rounds=2, max_metric_calls=200, minibatch_size=3, proposer="rewrite"),
        run_dir=tmp_path,
        reflection_lm=accounted(ReflectionLM(), "reflection"), attributor=make_attributor(),
        base_prompts={QA_PROMPT: f"{SEED_QA} Always {QA_MAGIC} before answering."},
    )
    state = run_loop(ctx)
    html = render_report(tmp_path).read_text()
    section = html[html.index("id='optimization'"):]
    final = state.final
    assert f"held-out accuracy <b>{final['seed_accuracy']:.1%} → {final['best_accuracy']:.1%}</b>" in section
    # the paired effect, as the CLI prints it: gain, CI, p and the questions fixed and broken
    cases = json.loads((tmp_path / "final.json").read_text())["cases"]
    fixed = sum(c["best_score"] > c["seed_score"] for c in cases)
    assert re.search(r"[+-]\d+\.\d points, paired bootstrap 95% CI \[[+-]\d+\.\d, [+-]\d+\.\d\], p = [01]\.\d{3} · "
                     rf"{fixed} questions fixed, \d+ broken", section)
    assert section.count("<circle") == len(state.rounds) + 1  # the seed, then each round
    spent = json.loads((tmp_path / "final.json").read_text())
    heldout = spent["spend"]["rollouts"] - spent["optimization_spend"]["rollouts"]
    assert f"{spent['optimization_spend']['rollouts']} optimization rollouts of a 200-rollout budget" in section
    assert f"{heldout} held-out evaluation rollouts" in section and heldout == 2 * len(cases)
    assert "<code>fact_extraction</code>" in section and "<code>memory_update</code>" not in section
    assert "Always check every memory before answering." in section
    errors = html[html.index("id='errors'"):html.index("id='optimization'")]
    assert "ExtractionError" in errors and "per optimization round" in errors
    header = html[html.index('<header class="top">'):html.index("</header>")]
    assert "system <b>looptest</b>" in header and f">{state.final['spend']['llm_calls']}<" in header


def test_failed_attribution_and_bad_blame_records_are_shown(tmp_path: Path, run_dir: Path) -> None:
    root = tmp_path / "odd-blame"
    shutil.copytree(run_dir, root)
    payload = json.loads((root / "blame.json").read_text())
    payload["signals"][0]["error_type"] = None  # the method gave no answer
    payload["signals"].append({"case_id": "x"})  # malformed: missing fields
    (root / "blame.json").write_text(json.dumps(payload))
    data = collect_run(root)
    assert [b.error_type for b in data.blame][0] == "AttributionFailed"
    assert any(n.startswith("blame.json: record 3 skipped") for n in data.notes)
    html = render_report(root).read_text()
    assert 'data-filter="AttributionFailed"' in html and "the attribution method gave no answer" in html


def test_unattributed_labels_are_shown_as_sent_to_every_prompt(tmp_path: Path, run_dir: Path) -> None:
    """The unattributed ablation labels every failure with no prompt component because it sends it to every
    prompt: the report must not chart or explain those labels as "no prompt, not optimizable"."""
    root = tmp_path / "unattributed"
    shutil.copytree(run_dir, root)
    payload = json.loads((root / "blame.json").read_text())
    for rec in payload["signals"]:
        rec.update(method="unattributed", prompt_component=None, error_type="ResponseError")
    (root / "blame.json").write_text(json.dumps(payload))
    html = render_report(root).read_text()
    labels = len(payload["signals"])
    assert "every prompt (unattributed)" in html
    assert f"{labels} are the unattributed ablation&#x27;s labels" in html  # the lead, escaped
    assert "no prompt (unoptimizable)" not in html and "not optimizable</b>" not in html
    assert html.count("the unattributed ablation's label (no operation was blamed)") == labels  # one per question


def test_report_out_an_existing_directory_writes_into_it(tmp_path: Path, run_dir: Path) -> None:
    from memtrace_opt.cli import main

    target = tmp_path / "reports"
    target.mkdir()
    assert main(["report", str(run_dir), "--out", str(target)]) == 0
    assert [p.name for p in target.iterdir()] == ["report.html"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_header_says_when_the_prompts_started_from_the_published_seed(tmp_path: Path, run_dir: Path) -> None:
    import yaml

    root = tmp_path / "published"
    shutil.copytree(run_dir, root, ignore=shutil.ignore_patterns("report.html"))
    config_path = root / "config.yaml"
    config = yaml.safe_load(config_path.read_text()) if config_path.exists() else {}
    config.setdefault("system", {})["seed"] = "published"
    config_path.write_text(yaml.safe_dump(config))
    def header(html: str) -> str:
        return html[html.index('<header class="top">'): html.index("</header>")]

    assert "seed prompts <b>published</b>" in header(render_report(root).read_text())
    assert "seed prompts" not in header(render_report(run_dir).read_text())
