"""The Python API and the CLI do the same steps: one config through both leaves the same run directory.

For ``eval``, ``attribute`` and ``optimize`` the file set is the same and every file's content is the
same, up to what differs between any two runs: wall-clock durations (``wall_s``, ``latency_s``, ``seconds``), the
time a change was recorded (``at``), a graph header's random run id and the run directory's absolute path.
Those are normalised by name, narrowly; nothing else is. A step one side does and the other skips (the CLI's held-out
attribution, once done by the command alone) shows as a missing file or a different one.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import yaml

from memtrace_opt import attribute, evaluate, optimize
from memtrace_opt.cli import main
from memtrace_opt.run.lms import Injected
from tests.test_loop_compare import write_config
from tests.test_loop_fixtures import ReflectionLM, TaskLM, accounted, conversations

#: Fields whose value is a duration or a moment, never a result (``seconds``: a blame's attribution cost).
VOLATILE = {"wall_s", "latency_s", "seconds", "at"}
#: A graph's random identity (the loop's graphs get a fresh uuid per run), blanked in graph headers only.
GRAPH_IDS = {"run_id", "replayed_from"}


def lms() -> dict:
    """Fresh scripted LMs (each side gets its own, so no call count or cache carries over)."""
    task = accounted(TaskLM(conversations()), "task")
    return {"task": task, "judge": task, "reflection": accounted(ReflectionLM(), "reflection")}


def normalised(value: object, root: Path) -> object:
    """``value`` with volatile fields blanked and the run dir's path replaced by ``RUN_DIR``."""
    if isinstance(value, dict):
        return {k: "<volatile>" if k in VOLATILE else normalised(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [normalised(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(str(root.resolve()), "RUN_DIR").replace(str(root), "RUN_DIR")
    return value


def snapshot(root: Path) -> dict[str, object]:
    """Every file under ``root`` by relative path: JSON, JSONL (graphs) and YAML parsed and normalised, text as is."""
    out: dict[str, object] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != ".lock"):
        rel = path.relative_to(root).as_posix()
        if rel.endswith(".jsonl.gz"):
            head, *rest = [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]
            head["meta"] = {k: "<id>" if k in GRAPH_IDS else v for k, v in head.get("meta", {}).items()}
            out[rel] = [normalised(record, root) for record in [head, *rest]]
        elif path.suffix == ".json":
            out[rel] = normalised(json.loads(path.read_text(encoding="utf-8")), root)
        elif path.suffix == ".yaml":
            out[rel] = normalised(yaml.safe_load(path.read_text(encoding="utf-8")), root)
        else:
            out[rel] = normalised(path.read_text(encoding="utf-8", errors="replace"), root)
    return out


def differences(a: Path, b: Path) -> list[str]:
    """What differs between two run dirs: files only one has, then files whose content differs."""
    left, right = snapshot(a), snapshot(b)
    only = [f"only in {a.name}: {k}" for k in sorted(set(left) - set(right))]
    only += [f"only in {b.name}: {k}" for k in sorted(set(right) - set(left))]
    return only + [f"differs: {k}" for k in sorted(set(left) & set(right)) if left[k] != right[k]]


def test_eval_and_attribute_leave_the_same_run_dir(tmp_path):
    config = write_config(tmp_path, "attributed")
    api, cli = tmp_path / "api", tmp_path / "cli"
    evaluate(config, out=api, lms=lms())
    attribute(api, lms=lms())
    inj = Injected.of(lms())
    assert main(["eval", str(config), "--out", str(cli), "--quiet"], injected=inj) == 0
    assert main(["attribute", str(cli), "--quiet"], injected=Injected.of(lms())) == 0
    assert (api / "blame.json").exists() and list((api / "graphs").glob("*.jsonl.gz"))
    assert differences(api, cli) == []


def test_optimize_leaves_the_same_run_dir_and_the_check_sees_a_skipped_step(tmp_path):
    config = write_config(tmp_path, "attributed")
    api, cli, skipped = tmp_path / "api", tmp_path / "cli", tmp_path / "skipped"
    optimize(config, out=api, lms=lms())
    assert main(["optimize", str(config), "--out", str(cli), "--quiet"], injected=Injected.of(lms())) == 0
    assert {"final.json", "checkpoint.json", "blame.json"} <= {p.name for p in api.iterdir()}
    assert differences(api, cli) == []
    optimize(config, out=skipped, lms=lms(), attribute_heldout=False)  # what the API did before the CLI's step moved
    assert differences(api, skipped) == [f"only in {api.name}: blame.json"]
