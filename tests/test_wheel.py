"""The built wheel works on its own: what a user gets from ``pip install memtrace-opt`` (issue #37).

The editable install every other test runs under reads the source tree, so a file missing from the
wheel (the bundled mini dataset, a subpackage left out of ``[tool.setuptools] packages``) passes them
all and breaks only for users. Here the wheel is built from a copy of the sources, installed with
``--no-deps`` into a fresh venv that borrows the dependencies of the running one through a ``.pth``
file (quick and offline), and driven from a directory outside the source tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from memtrace_opt.commands.version import version_line
from memtrace_opt.config import load_config
from memtrace_opt.data import dataset_stats
from memtrace_opt.data.mini import bundled_path, load_mini
from memtrace_opt.examples import SHIPPED

ROOT = Path(__file__).resolve().parents[1]
#: What the build reads: the metadata and the source folders (``package-dir`` in pyproject.toml).
SOURCES = ("pyproject.toml", "README.md", "memtrace_opt", "systems", "optimizers", "experiments/configs")
#: Source folder -> its path inside the wheel.
WHEEL_DIRS = {"memtrace_opt": "memtrace_opt", "systems": "memtrace_opt/systems",
              "optimizers": "memtrace_opt/optimizers"}
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
RUN_CONFIG = """run_name: wheel
output_dir: out
dataset: {name: mini, conversations: [mini-1], max_questions: 2}
system: {name: long_context}
eval: {judge: deterministic}
"""
EVALUATE = """import json, sys
from memtrace_opt import evaluate
from memtrace_opt.testing import ScriptedLM
run = evaluate(sys.argv[1], lms={"task": ScriptedLM([], default="Not mentioned")})
print(json.dumps({"run_dir": str(run.run_dir), "n": run.summary["n"]}))
"""
WHERE = """import json, memtrace_opt, memtrace_opt.systems, memtrace_opt.optimizers
from memtrace_opt.data.mini import bundled_path
print(json.dumps([memtrace_opt.__file__, memtrace_opt.systems.__file__, memtrace_opt.optimizers.__file__,
                  str(bundled_path())]))
"""


def _run(args: list[str | Path], **kw) -> subprocess.CompletedProcess:
    """Run a command; on failure the assertion shows its output, not just an exit code."""
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kw)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _source_files() -> set[str]:
    """Every file of the three source folders, as its path in the wheel (caches left out)."""
    out = set()
    for folder, inside in WHEEL_DIRS.items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                out.add(f"{inside}/{path.relative_to(ROOT / folder).as_posix()}")
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    """``(wheel, build log)``, built from a copy so no stale ``build/`` of the checkout leaks into it."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    done = _run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "--no-index",
                 "-w", tmp / "dist", src])
    wheels = list((tmp / "dist").glob("memtrace_opt-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], done.stdout + done.stderr


@pytest.fixture(scope="module")
def venv(built, tmp_path_factory) -> tuple[Path, Path]:
    """``(venv, its site-packages)``: the wheel alone provides memtrace_opt; dependencies come from ours."""
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", env_dir])
    python = env_dir / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", built[0]])
    # A .pth line only appends the folder: its own .pth files (our editable memtrace_opt finder) stay unread.
    borrowed = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "zz_borrowed_dependencies.pth").write_text("".join(f"{p}\n" for p in borrowed))
    return env_dir, site


def _in_venv(venv: tuple[Path, Path], args: list[str | Path], cwd: Path) -> str:
    """Run ``args`` with the venv first on PATH, no PYTHONPATH, from ``cwd``; its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    env["PATH"] = f"{venv[0] / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return _run(args, cwd=cwd, env=env).stdout


def test_version_flag_prints_the_installed_version():
    """In the editable install too: the metadata version, which is pyproject.toml's."""
    assert version_line() == f"memtrace-opt {VERSION}"


def test_wheel_ships_every_source_and_data_file(built):
    wheel, log = built
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "is absent from the `packages` configuration" not in log  # setuptools' warning for an unlisted folder
    assert wheel.name.startswith(f"memtrace_opt-{VERSION}-")
    missing = _source_files() - names
    assert not missing, f"files of the source folders not in the wheel: {sorted(missing)}"
    for pattern in ("memtrace_opt/data/mini/", "memtrace_opt/systems/", "memtrace_opt/optimizers/"):
        assert any(n.startswith(pattern) for n in names), pattern
    assert f"memtrace_opt/{bundled_path().relative_to(ROOT / 'memtrace_opt').as_posix()}" in names
    assert not {n for n in names if n.startswith(("tests/", "experiments/", "systems/", "optimizers/"))}
    # experiments/configs/ ships only the configs `memtrace-opt init` writes, none of LoCoMo's
    configs = {n.removeprefix("memtrace_opt/example_configs/") for n in names
               if n.startswith("memtrace_opt/example_configs/")}
    assert configs == {f"{name}.yaml" for name in SHIPPED} | {"__init__.py"}


def test_installed_wheel_runs_from_outside_the_source_tree(venv, tmp_path):
    env_dir, site = venv
    cli = env_dir / "bin" / "memtrace-opt"
    where = json.loads(_in_venv(venv, [env_dir / "bin" / "python", "-c", WHERE], tmp_path))
    for path in where:  # memtrace_opt, its mapped subpackages and the bundled data: all from the wheel
        assert Path(path).is_relative_to(site), f"{path} is not from the installed wheel in {site}"
    assert _in_venv(venv, [cli, "--version"], tmp_path).strip() == f"memtrace-opt {VERSION}"

    stats = json.loads(_in_venv(venv, [cli, "data", "stats", "--dataset", "mini", "--json"], tmp_path))
    assert stats == json.loads(json.dumps(dataset_stats(load_mini())))  # the same file as the source tree's
    systems = json.loads(_in_venv(venv, [cli, "systems", "--json"], tmp_path))
    assert {s["name"] for s in systems} >= {"long_context", "rag", "mem0", "evermemos"}

    # The quickstart's path without a model: evaluate the bundled mini set, then the HTML report.
    (tmp_path / "run.yaml").write_text(RUN_CONFIG)
    run = json.loads(_in_venv(venv, [env_dir / "bin" / "python", "-c", EVALUATE, "run.yaml"], tmp_path))
    assert run["n"] == 2 and Path(run["run_dir"]).is_relative_to(tmp_path)
    _in_venv(venv, [cli, "report", run["run_dir"]], tmp_path)
    html = (Path(run["run_dir"]) / "report.html").read_text()
    assert "<style>" in html and "mini-1" in html


def test_installed_wheel_writes_a_runnable_quickstart_config(venv, tmp_path):
    """A pip user has no experiments/configs/: ``init`` writes the quickstart with its runs beside it."""
    cli = venv[0] / "bin" / "memtrace-opt"
    listed = json.loads(_in_venv(venv, [cli, "init", "--json"], tmp_path))
    assert [row["name"] for row in listed] == list(SHIPPED) and listed[0]["command"] == "optimize"
    written = json.loads(_in_venv(venv, [cli, "init", "quickstart", "--json"], tmp_path))
    assert written["next"][0] == "memtrace-opt optimize quickstart.yaml --resume"
    config = load_config(tmp_path / "quickstart.yaml")
    assert Path(config.output_dir) == tmp_path / "runs"
    assert config.split is not None and config.split.heldout == ["mini-2", "mini-7", "mini-8", "mini-9"]
