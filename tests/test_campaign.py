"""Campaigns: stop anywhere, copy the committed files to a fresh clone, continue with nothing finished redone."""

from __future__ import annotations

import dataclasses
import fnmatch
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from memtrace_opt.campaign import cache_path, campaign_progress, export_cache, load_campaign, run_campaign
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.cache import CachedLM, cache_key
from memtrace_opt.run.lms import Injected
from tests.test_loop_compare import write_dataset
from tests.test_loop_fixtures import SEED_QA, ReflectionLM, TaskLM, accounted, conversations

METHODS = ["none", "attributed"]
CAMPAIGN = Path("experiments") / "campaigns" / "demo"
#: What .gitignore keeps out of a commit of a campaign folder (the working cache, the run dirs' locks).
IGNORED = ("lm_cache.sqlite*", ".lock")


class Recorder:
    """The scripted LM behind the cache: logs the key of every call that reaches it (a call the cache did not
    answer) and raises KeyboardInterrupt, like a Ctrl-C, once ``log`` holds ``stop_at`` calls."""

    def __init__(self, inner: Any, log: list[str], stop_at: int | None = None) -> None:
        self.inner, self.log, self.stop_at, self.model_id = inner, log, stop_at, inner.model_id

    def chat(self, messages: list[dict[str, str]], **kw: Any) -> Any:
        if self.stop_at is not None and len(self.log) >= self.stop_at:
            raise KeyboardInterrupt
        key = cache_key(self.model_id, messages, max_tokens=kw.get("max_tokens", 512),
                        temperature=kw.get("temperature", 0.0), json_schema=kw.get("json_schema"), stop=kw.get("stop"))
        result = self.inner.chat(messages, **kw)
        self.log.append(key)
        return dataclasses.replace(result, latency_s=1.5)


def scripted(folder: Path, log: list[str], stop_at: int | None = None) -> tuple[Injected, list[CachedLM]]:
    """Task/judge/reflection as the factory builds them (accounted over the disk cache), cached in the campaign."""
    caches = [CachedLM(Recorder(TaskLM(conversations()), log, stop_at), cache_path(folder)),
              CachedLM(Recorder(ReflectionLM(), log, stop_at), cache_path(folder))]
    task = accounted(caches[0], "task")
    return Injected({"task": task, "judge": task, "reflection": accounted(caches[1], "reflection")}), caches


def make_clone(root: Path, *, sealed: bool = False) -> Path:
    """A repository-like tree: the dataset, a run config and the campaign folder naming it."""
    (root / "data").mkdir(parents=True)
    write_dataset(root / "data" / "looptest.json")
    (root / "experiments" / "configs").mkdir(parents=True)
    (root / "experiments" / "configs" / "demo.yaml").write_text(yaml.safe_dump({
        "run_name": "demo", "dataset": {"name": "mini", "path": "../../data/looptest.json"},
        "split": {"optimize": ["c-opt"], "validation": ["c-val"], "heldout": ["c-held"]},
        "system": {"name": "long_context", "prompts": {"question_answering": SEED_QA}},
        "eval": {"judge": "deterministic"},
        "optimizer": {"method": "attributed", "rounds": 2, "max_metric_calls": 80, "minibatch_size": 3},
    }))
    folder = root / CAMPAIGN
    folder.mkdir(parents=True)
    (folder / "campaign.yaml").write_text(yaml.safe_dump(
        {"config": "../../configs/demo.yaml", "methods": METHODS, "description": "resume test", "sealed": sealed}))
    return folder


def run(folder: Path, log: list[str], stop_at: int | None = None, **kw: Any) -> Any:
    injected, caches = scripted(folder, log, stop_at)
    try:
        return run_campaign(folder, injected=injected, **kw)
    finally:
        for c in caches:
            c.close()


def copy_committed(src_root: Path, dst_root: Path) -> None:
    """Copy what ``git add`` would take of a clone: everything but the git-ignored files."""
    shutil.copytree(src_root, dst_root, ignore=lambda _d, names: [
        n for n in names if any(fnmatch.fnmatch(n, pat) for pat in IGNORED)])
    assert not list(dst_root.rglob("lm_cache.sqlite*"))


def without_accounting(data: Any) -> Any:
    """``data`` with each spend record cut to its rollouts: LM calls, tokens and wall-clock differ after a
    stop inside a round (the redone part of the round is counted again, as cache hits), results must not."""
    if isinstance(data, dict):
        if "rollouts" in data and "llm_calls" in data:
            return {"rollouts": data["rollouts"]}
        return {k: without_accounting(v) for k, v in data.items() if k != "wall_s"}
    return [without_accounting(v) for v in data] if isinstance(data, list) else data


def results(folder: Path) -> dict[str, Any]:
    """Per method: the held-out result (final.json, accounting aside) and the best prompts."""
    out = {}
    for method in METHODS:
        run_dir = folder / "runs" / method
        kept = without_accounting(json.loads((run_dir / "final.json").read_text()))
        prompts = {p.name: p.read_text() for p in sorted((run_dir / "prompts").glob("*"))}
        checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
        out[method] = {"final": kept, "prompts": prompts, "best": checkpoint["best_candidate"],
                       "rounds": [(r["index"], r["val_score"], r["improved"]) for r in checkpoint["rounds"]]}
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[dict[str, Any], list[str]]:
    """Campaign A, run through without a stop: its results and every LM call it made."""
    folder = make_clone(tmp_path_factory.mktemp("a") / "repo")
    log: list[str] = []
    report = run(folder, log)
    assert report.finished == 2 and report.remaining == 0
    return results(folder), log


@pytest.mark.parametrize("stop", ["after_first_method", "ctrl_c_in_second_method"])
def test_a_stopped_campaign_continued_on_a_fresh_clone_ends_as_the_uninterrupted_one(tmp_path, reference, stop):
    expected, all_calls = reference
    folder_b = make_clone(tmp_path / "b" / "repo")
    before: list[str] = []
    if stop == "after_first_method":
        report = run(folder_b, before, stop_after=1)
        assert [m.status for m in report.methods] == ["finished", "not started"]
    else:
        # the stop must fall inside the second method: halfway through the calls it makes after the first
        none_calls: list[str] = []
        run(make_clone(tmp_path / "probe" / "repo"), none_calls, stop_after=1)
        stop_at = len(none_calls) + (len(all_calls) - len(none_calls)) // 2
        with pytest.raises(KeyboardInterrupt):
            run(folder_b, before, stop_at=stop_at)
        assert len(before) == stop_at
        status = campaign_progress(folder_b)
        assert [m.status for m in status.methods] == ["finished", "running"]
    assert list((folder_b / "state").glob("cache-*.jsonl.gz"))  # the finally: exported what was paid for

    folder_c_root = tmp_path / "c" / "elsewhere" / "repo"  # a fresh clone, at another path
    copy_committed(tmp_path / "b" / "repo", folder_c_root)
    folder_c = folder_c_root / CAMPAIGN
    after: list[str] = []
    lines: list[str] = []
    report = run(folder_c, after, progress=lines.append)
    assert report.finished == 2
    # the copied run dirs' config.yaml held B's absolute paths: adopted, not refused as a changed config
    assert "campaign demo: none: run dir moved from another clone, its config paths updated" in lines
    assert results(folder_c) == expected
    assert not set(after) & set(before), "the continuation repeated an LM call made before the stop"
    assert sorted(before + after) == sorted(all_calls)  # exactly the calls not finished before, each once
    for path in folder_c.rglob("*"):  # nothing in the continued campaign points back at the old clone
        if path.is_file() and path.suffix in (".json", ".yaml", ".txt"):
            assert str(tmp_path / "b") not in path.read_text(), path


def test_chunks_are_append_only_and_deterministic(tmp_path, reference):
    folder = make_clone(tmp_path / "repo")
    run(folder, [], stop_after=1)
    first = sorted((folder / "state").glob("cache-*.jsonl.gz"))
    blobs = {p.name: p.read_bytes() for p in first}
    run(folder, [])
    chunks = sorted((folder / "state").glob("cache-*.jsonl.gz"))
    assert len(chunks) > len(first) and {p.name: p.read_bytes() for p in first} == blobs  # old chunks untouched
    assert export_cache(folder) is None  # nothing new: no empty chunk
    again = make_clone(tmp_path / "again" / "repo")
    run(again, [], stop_after=1)
    assert [p.name for p in sorted((again / "state").glob("cache-*.jsonl.gz"))] == list(blobs)

    def entries(path: Path) -> list[dict[str, Any]]:  # the same calls give the same lines, in key order
        rows = [json.loads(line) for line in gzip.open(path, "rt")]
        assert [r["key"] for r in rows] == sorted(r["key"] for r in rows)
        return [{k: v for k, v in r.items() if k != "created"} for r in rows]  # when it was stored differs

    assert [entries(p) for p in sorted((again / "state").glob("cache-*.jsonl.gz"))] == [entries(p) for p in first]


def test_progress_lines_before_during_and_after(tmp_path):
    folder = make_clone(tmp_path / "repo")
    assert str(campaign_progress(folder)) == ("campaign demo: 0/2 methods finished, 0 LM answers stored, "
                                              "0 s LM time spent, LM time left unknown (add costs: to campaign.yaml)")
    lines: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        run(folder, [], stop_at=3, progress=lines.append)
    assert "campaign demo: method 1/2 none starting" in lines
    during = campaign_progress(folder)
    assert during.methods[0].status == "running" and during.remaining == 2
    assert during.cached_entries == 3 and during.lm_seconds == pytest.approx(4.5)
    assert str(during).startswith("campaign demo: 0/2 methods finished (none: ")
    lines.clear()
    report = run(folder, [], progress=lines.append)
    assert "campaign demo: method 1/2 none continuing" in lines
    assert "campaign demo: method 2/2 attributed starting" in lines
    assert lines[-1] == str(report) == str(campaign_progress(folder))
    assert lines[-1].startswith("campaign demo: 2/2 methods finished, ") and "LM answers stored" in lines[-1]
    assert [m.text() for m in report.methods] == ["none: finished, held-out 0.0%", "attributed: finished, held-out 100.0%"]
    assert report.to_dict()["finished"] == 2 and report.llm_calls > 0


@pytest.mark.parametrize(("text", "field"), [
    ("methods: [none]\n", "config"),
    ("config: nowhere.yaml\nmethods: [none]\n", "config"),
    ("config: ../../configs/demo.yaml\n", "methods"),
    ("config: ../../configs/demo.yaml\nmethods: [none, bogus]\n", "methods[1]"),
    ("config: ../../configs/demo.yaml\nmethods: [none, none]\n", "methods"),
    ("config: ../../configs/demo.yaml\nmethods: [none]\nrounds: 3\n", "rounds"),
    ("config: ../../configs/demo.yaml\nmethods: [none]\ndescription: [1]\n", "description"),
    ("config: ../../configs/demo.yaml\nmethods: [none]\ncosts: nowhere.json\n", "costs"),
    ("config: ../../configs/demo.yaml\nmethods: [none]\ncosts_row: pairs\n", "costs_row"),
    ("config: ../../configs/demo.yaml\nmethods: [none]\n", "sealed"),  # the config reads a dataset file
    ("config: ../../configs/demo.yaml\nmethods: [none]\nsealed: 'yes'\n", "sealed"),
])
def test_a_malformed_campaign_file_is_a_config_error_naming_the_field(tmp_path, text, field):
    folder = make_clone(tmp_path / "repo")
    (folder / "campaign.yaml").write_text(text)
    with pytest.raises(ConfigError) as err:
        run_campaign(folder)
    assert err.value.field == field and err.value.path.endswith("campaign.yaml")
    assert f"campaign.yaml: {field}" in err.value.one_line()
    with pytest.raises(ConfigError):
        load_campaign(folder)


def test_not_a_mapping_or_no_file(tmp_path):
    folder = make_clone(tmp_path / "repo")
    (folder / "campaign.yaml").write_text("- a\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        campaign_progress(folder)
    with pytest.raises(ConfigError, match="file not found"):
        campaign_progress(tmp_path)


def test_cli_run_then_status(tmp_path, capsys):
    from memtrace_opt.cli import main

    folder = make_clone(tmp_path / "repo")
    injected, caches = scripted(folder, [])
    try:
        assert main(["campaign", "run", str(folder), "--stop-after", "1"], injected=injected) == 0
        first = capsys.readouterr()
        assert "method 1/2 none starting" in first.err
        assert first.out.rstrip().splitlines()[-1].startswith("campaign demo: 1/2 methods finished, ")
        assert main(["campaign", "status", str(folder), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert (status["finished"], status["remaining"]) == (1, 1)
        assert [m["status"] for m in status["methods"]] == ["finished", "not started"]
        assert main(["campaign", "run", str(folder)], injected=injected) == 0  # the same command continues
        out = capsys.readouterr().out
        assert "attributed" in out and "2/2 methods finished" in out
    finally:
        for c in caches:
            c.close()
    (folder / "campaign.yaml").write_text("config: ../../configs/demo.yaml\nmethods: [bogus]\n")
    assert main(["campaign", "status", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "campaign.yaml: methods[0]: unknown method 'bogus'" in err and err.count("\n") == 1


def test_a_real_config_change_is_still_refused_on_the_new_clone(tmp_path):
    folder_b = make_clone(tmp_path / "b" / "repo")
    with pytest.raises(KeyboardInterrupt):
        run(folder_b, [], stop_at=3)
    copy_committed(tmp_path / "b" / "repo", tmp_path / "c" / "repo")
    config = tmp_path / "c" / "repo" / "experiments" / "configs" / "demo.yaml"
    config.write_text(config.read_text().replace("minibatch_size: 3", "minibatch_size: 2"))
    with pytest.raises(ConfigError, match=r"different config \(changed: .*optimizer.minibatch_size"):
        run(tmp_path / "c" / "repo" / CAMPAIGN, [])


def test_costs_give_the_lm_time_left_shrinking_as_methods_finish(tmp_path):
    """With ``costs:`` (a bench-lm result), the progress line says the LM time left: the estimate of every
    method before the start, the unfinished methods' share after a stop, nothing once all are finished."""
    from memtrace_opt.campaign.estimate import estimate_config
    from tests.test_estimate import bench_file

    folder = make_clone(tmp_path / "repo")
    bench = bench_file(tmp_path, per_turn=20.0, per_question=30.0)
    (folder / "campaign.yaml").write_text(yaml.safe_dump(
        {"config": "../../configs/demo.yaml", "methods": METHODS, "costs": str(bench), "sealed": False}))
    rows = {r["method"]: r for r in estimate_config(folder.parent.parent / "configs" / "demo.yaml", bench,
                                                    methods=METHODS)["methods"]}
    before = campaign_progress(folder)
    # the seed's ingestion is paid by the first method; the second reads it from the shared cache
    cached = min(rows["none"]["seed_ingestion_s"], rows["attributed"]["seed_ingestion_s"])
    assert cached > 0
    assert before.lm_seconds_left == pytest.approx((sum(r["low_s"] for r in rows.values()) - cached,
                                                    sum(r["high_s"] for r in rows.values()) - cached))
    low, high = (s / 3600 for s in before.lm_seconds_left)
    assert str(before).endswith(f"{low:.1f} to {high:.1f} h LM time left (estimate)")
    run(folder, [], stop_after=1)
    assert campaign_progress(folder).lm_seconds_left == pytest.approx((rows["attributed"]["low_s"] - cached,
                                                                       rows["attributed"]["high_s"] - cached))
    run(folder, [])
    assert campaign_progress(folder).lm_seconds_left == (0.0, 0.0)


# -- sealed campaigns: state that quotes the data, committed sealed to the dataset file ------------------
def copy_committed_sealed(src_root: Path, dst_root: Path) -> None:
    """What ``git add`` takes of a clone holding a sealed campaign: its own .gitignore keeps runs/ out."""
    folder = src_root / CAMPAIGN
    assert (folder / ".gitignore").read_text().split()[-1] == "runs/"
    shutil.copytree(src_root, dst_root, ignore=lambda d, names: [
        n for n in names if any(fnmatch.fnmatch(n, pat) for pat in IGNORED) or (Path(d) == folder and n == "runs")])
    assert not (dst_root / CAMPAIGN / "runs").exists()


def test_a_sealed_campaign_commits_no_readable_data_and_continues_on_a_fresh_clone(tmp_path, reference):
    from memtrace_opt.campaign.seal import dataset_key, unseal

    expected, all_calls = reference
    folder_b = make_clone(tmp_path / "b" / "repo", sealed=True)
    before: list[str] = []
    run(folder_b, before, stop_after=1)
    assert json.loads((folder_b / "state" / "progress.json").read_text())["finished"] == 1

    clone = tmp_path / "c" / "elsewhere" / "repo"
    copy_committed_sealed(tmp_path / "b" / "repo", clone)
    folder_c = clone / CAMPAIGN
    status = campaign_progress(folder_c)  # from state/progress.json: the fresh clone has no run dirs
    assert [m.status for m in status.methods] == ["finished", "not started"]
    after: list[str] = []
    report = run(folder_c, after)
    assert report.finished == 2 and results(folder_c) == expected
    assert not set(after) & set(before), "the continuation repeated an LM call made before the stop"
    assert sorted(before + after) == sorted(all_calls)

    chunks = sorted((folder_c / "state").glob("cache-*"))
    assert len(chunks) == 2 and all(p.name.endswith(".jsonl.gz.sealed") for p in chunks)
    dataset = clone / "data" / "looptest.json"
    golds = {q["answer"] for c in json.loads(dataset.read_text())["conversations"] for q in c["qa"]}
    plain = b"".join(gzip.decompress(unseal(p.read_bytes(), dataset_key(dataset), where=p.name)) for p in chunks)
    assert [g for g in golds if g.encode() in plain], "the attributed method's replies quote gold answers"
    blob = b"".join(p.read_bytes() for p in chunks)
    assert not [g for g in golds if g.encode() in blob]
    with pytest.raises(OSError):
        gzip.decompress(blob)  # not a gzip stream: nothing readable without the key


def test_a_finished_method_is_restored_from_its_sealed_archive_not_replayed(tmp_path, reference):
    """A fresh clone restores a sealed campaign's finished run dir from state/: no replay, so neither the LM
    cache nor the code of the day can change a finished method's result."""
    from memtrace_opt.campaign.archive import archive_path, archive_run

    expected, _calls = reference
    folder_b = make_clone(tmp_path / "b" / "repo", sealed=True)
    run(folder_b, [], stop_after=1)
    camp = load_campaign(folder_b)
    archive = archive_path(camp, METHODS[0])
    assert archive.exists() and not archive_path(camp, METHODS[1]).exists()
    blob = archive.read_bytes()
    archive.unlink()
    assert archive_run(camp, METHODS[0]) == archive and archive.read_bytes() == blob  # deterministic
    assert archive_run(camp, METHODS[0]) is None  # written once
    with pytest.raises(OSError):
        gzip.decompress(blob)  # sealed: the run dir's graphs quote the data

    clone = tmp_path / "c" / "elsewhere" / "repo"
    copy_committed_sealed(tmp_path / "b" / "repo", clone)
    folder_c = clone / CAMPAIGN
    for chunk in (folder_c / "state").glob("cache-*"):
        chunk.unlink()  # no cached answer left: a replay would have to call the LM
    lines: list[str] = []
    report = run(folder_c, [], stop_at=0, stop_after=1, progress=lines.append)  # any LM call raises
    assert report.finished == 1 and any("restored from its archive" in line for line in lines)
    restored = {p.relative_to(folder_c / "runs" / METHODS[0]).as_posix()
                for p in (folder_c / "runs" / METHODS[0]).rglob("*")}
    original = {p.relative_to(folder_b / "runs" / METHODS[0]).as_posix()
                for p in (folder_b / "runs" / METHODS[0]).rglob("*") if p.name != ".lock"}
    assert restored == original
    first = json.loads((folder_c / "runs" / METHODS[0] / "final.json").read_text())
    assert without_accounting(first) == expected[METHODS[0]]["final"]

    archive_c = archive_path(load_campaign(folder_c), METHODS[0])
    archive_c.write_bytes(archive_c.read_bytes()[:-40])  # damaged in transit
    shutil.rmtree(folder_c / "runs" / METHODS[0])
    with pytest.raises(ConfigError) as err:
        run(folder_c, [], stop_at=0, stop_after=1)
    assert err.value.path == str(archive_c)


def test_a_sealed_campaign_needs_the_same_dataset_file(tmp_path):
    folder = make_clone(tmp_path / "b" / "repo", sealed=True)
    run(folder, [], stop_after=1)
    copy_committed_sealed(tmp_path / "b" / "repo", tmp_path / "c" / "repo")
    dataset = tmp_path / "c" / "repo" / "data" / "looptest.json"
    dataset.write_text(dataset.read_text() + "\n")  # another copy of the data: another key
    with pytest.raises(ConfigError, match="cannot be unsealed with this dataset file") as err:
        run(tmp_path / "c" / "repo" / CAMPAIGN, [])
    assert err.value.path.endswith(".jsonl.gz.sealed")


def test_sealed_needs_a_dataset_file_and_plain_chunks_are_refused(tmp_path):
    folder = make_clone(tmp_path / "repo", sealed=True)
    config = folder.parent.parent / "configs" / "demo.yaml"
    plain = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**plain, "dataset": {"name": "mini"}}))
    with pytest.raises(ConfigError, match="reads no dataset file") as err:
        load_campaign(folder)
    assert err.value.field == "sealed"
    config.write_text(yaml.safe_dump(plain))
    (folder / "state").mkdir()
    (folder / "state" / "cache-0001.jsonl.gz").write_bytes(gzip.compress(b""))
    with pytest.raises(ConfigError, match="a plain chunk in a sealed campaign"):
        campaign_progress(folder)


def test_answers_are_saved_while_a_method_runs_and_on_sigterm(tmp_path, reference, monkeypatch):
    """A method is hours of LM time: the cache is exported every ``export_every_s`` while it runs (a SIGKILL
    then loses at most that much), and the CLI turns SIGTERM into the Ctrl-C path that exports on the way out."""
    import os
    import signal
    import time

    from memtrace_opt.commands.campaign import _sigterm_as_interrupt

    expected, _ = reference
    folder = make_clone(tmp_path / "repo")
    slow = Recorder.chat
    monkeypatch.setattr(Recorder, "chat", lambda self, m, **kw: (time.sleep(0.01), slow(self, m, **kw))[1])
    run(folder, [], export_every_s=0.05)
    chunks = sorted((folder / "state").glob("cache-*.jsonl.gz"))
    assert len(chunks) > len(METHODS)  # saves inside the methods, not only after each
    keys = [json.loads(line)["key"] for p in chunks for line in gzip.open(p, "rt")]
    assert len(keys) == len(set(keys))  # each answer in one chunk only
    assert results(folder) == expected
    with pytest.raises(KeyboardInterrupt), _sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_sigint_stops_a_campaign_started_in_the_background():
    """A shell starts ``nohup ... &`` with SIGINT ignored, so Python has no Ctrl-C handler: the campaign
    still turns ``kill -INT`` into the interrupt that exports, and leaves the ignore as it found it."""
    import os
    import signal
    import time

    from memtrace_opt.commands.campaign import _sigterm_as_interrupt

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt), _sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
