"""Ready configs shipped in the wheel, so ``pip install memtrace-opt`` users can run something at once.

The configs themselves live in the source tree's ``experiments/configs/`` (the user's layout) and
install as the data package ``memtrace_opt.example_configs`` (see ``[tool.setuptools]`` in
pyproject.toml): one file, no copy to drift. Only the configs that run on the bundled mini dataset
are shipped (:data:`SHIPPED`; pyproject.toml's package-data lists the same files, and
tests/test_wheel.py checks the wheel holds exactly these): every other one needs LoCoMo, which cannot
be redistributed, or is an experiment's record rather than a starting point.

A shipped config names ``output_dir: ../../runs``, which is right inside the source tree and wrong
anywhere else (it would point above the user's folder), so :func:`write_example` writes a copy whose
``output_dir`` is ``runs`` beside the copy; every other line, comments included, is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from memtrace_opt.errors import ConfigError

__all__ = ["EXAMPLES_PACKAGE", "SHIPPED", "Example", "list_examples", "write_example"]

#: The data package the shipped configs install as.
EXAMPLES_PACKAGE = "memtrace_opt.example_configs"
#: The shipped configs, in the order ``memtrace-opt init`` lists them: the quickstart first.
SHIPPED = ("quickstart", "long_context_mini", "rag_mini", "mem0_mini", "evermemos_mini")
#: The top-level ``output_dir`` line of a config (indented keys of the same name are not matched).
_OUTPUT_DIR_LINE = re.compile(r"^output_dir:.*$", re.MULTILINE)


@dataclass(frozen=True)
class Example:
    """One shipped config: its name (the file stem), what it is for, and the command that runs it."""

    name: str
    summary: str
    command: str
    text: str

    def next_steps(self, path: Path) -> list[str]:
        """The commands to run after writing the config to ``path``: the run, then its report."""
        run_name = yaml.safe_load(self.text).get("run_name", self.name)
        resume = " --resume" if self.command == "optimize" else ""
        steps = [f"memtrace-opt {self.command} {path}{resume}"]
        if self.command == "optimize":
            steps.append(f"memtrace-opt report {path.parent / 'runs' / run_name}")
        return steps


def _summary(text: str) -> str:
    """The first sentence of the config's opening comment (every shipped config opens with one)."""
    words: list[str] = []
    for line in text.splitlines():
        body = line.lstrip("#").strip()
        if not line.startswith("#") or not body or body.startswith("memtrace-opt"):
            break
        words.append(body)
    paragraph = " ".join(words)
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


def list_examples() -> list[Example]:
    """Every shipped config. An optimize config is one with a ``split``; the others are eval configs."""
    package = resources.files(EXAMPLES_PACKAGE)
    out = []
    for name in SHIPPED:
        text = (package / f"{name}.yaml").read_text(encoding="utf-8")
        command = "optimize" if "split" in (yaml.safe_load(text) or {}) else "eval"
        out.append(Example(name, _summary(text), command, text))
    return out


def write_example(name: str, directory: str | Path = ".", *, force: bool = False) -> tuple[Example, Path]:
    """Write the shipped config ``name`` to ``directory/name.yaml`` with ``output_dir: runs``.

    Refuses (a ConfigError naming the file) to overwrite an existing file unless ``force``: the user
    may have edited it.
    """
    examples = {e.name: e for e in list_examples()}
    if name not in examples:
        raise ConfigError(name, None, f"no shipped example of that name; choose one of {', '.join(examples)}")
    example = examples[name]
    path = Path(directory) / f"{name}.yaml"
    if path.exists() and not force:
        raise ConfigError(str(path), None, "already exists; pass --force to overwrite it")
    if _OUTPUT_DIR_LINE.search(example.text) is None:
        raise ConfigError(f"{EXAMPLES_PACKAGE}/{name}.yaml", "output_dir", "missing from the shipped example")
    run_with = "; then ".join(example.next_steps(path))
    header = f"# Written by `memtrace-opt init {name}`; runs go to runs/ beside this file. Run it: {run_with}\n"
    text = header + _OUTPUT_DIR_LINE.sub("output_dir: runs", example.text, count=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return example, path
