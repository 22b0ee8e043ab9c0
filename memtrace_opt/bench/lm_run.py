"""The ``bench-lm`` run: one system on the embedded model, once per variant, then scored by scoped replay.

Runs one system on the first sessions of one conversation of the bundled mini dataset (or a
dataset file), once per variant (a speculative-decoding mode, or a ``"LABEL: key=value"`` settings
run such as session-level ingestion), with no disk cache, on the same turns and questions, with the
accuracy of each beside its speed (:func:`~memtrace_opt.bench.lm.measure_variants`); then scores a
changed ingestion prompt on a few questions by scoped and by full replay
(:func:`~memtrace_opt.bench.lm.measure_scoped_replay`). The result is one JSON-ready object, the
shape ``experiments/results/bench_lm*.json`` keeps. A benchmark, not a test: minutes on two cores;
every figure is a ratio against the first mode measured in the same run.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any, Callable

import yaml

from memtrace_opt.bench.lm import Variant, measure_scoped_replay, measure_variants
from memtrace_opt.data import load_dataset
from memtrace_opt.data.mini import load_mini
from memtrace_opt.data.slicing import select
from memtrace_opt.errors import ConfigError
from memtrace_opt.eval.judge import JUDGE_KINDS
from memtrace_opt.lm.embedded import SPECULATIVE_MODES, EmbeddedLlama
from memtrace_opt.systems.registry import get_system
from memtrace_opt.systems.resolve import resolve_settings

__all__ = ["CHANGED_RULE", "parse_variant", "run_bench_lm"]

#: The sentence appended to the changed ingestion prompt (a realistic one-rule delta).
CHANGED_RULE = "\n\nRules learned from past mistakes:\n- If the step receives a date, it should keep the date in the fact."


def _conversation(dataset: Path | None, conversation: str | None, sessions: int) -> tuple[Any, int]:
    """The conversation cut to its first ``sessions`` sessions (questions answerable in them), and its turns."""
    data = load_mini() if dataset is None else load_dataset("locomo", path=dataset)
    ids = [conversation] if conversation else [data.conversations[0].id]
    conv = select(data, ids, max_sessions=sessions).conversations[0]
    return conv, sum(len(s.turns) for s in conv.sessions)


def parse_variant(text: str) -> Variant:
    """``"LABEL: key=value, key=value"`` → a :class:`~memtrace_opt.bench.lm.Variant` with those system settings
    (values read as YAML scalars: ``2`` is a number, ``session`` a string); a bad one is a ConfigError."""
    label, sep, rest = text.partition(":")
    settings: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError("--variant", None, f"{text!r}: expected 'LABEL: key=value, ...', got {item!r}")
        settings[key.strip()] = yaml.safe_load(value.strip())
    if not sep or not label.strip():
        raise ConfigError("--variant", None, f"{text!r}: expected 'LABEL: key=value, ...' (a label, then a colon)")
    return Variant(label.strip(), settings=settings)


def run_bench_lm(*, system: str = "mem0", modes: tuple[str, ...] = ("none", "ngram_mod"), sessions: int = 1,
                 questions: int = 3, dataset: Path | None = None, conversation: str | None = None,
                 model: str = "qwen-1.5b", threads: int | None = None, changed_prompt: str | None = None,
                 variants: tuple[str, ...] = (), judge: str = "deterministic", scoped_replay: bool = True,
                 progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Both measurements on the embedded model; the JSON-ready result (see the module docstring).
    ``variants``: ``"LABEL: key=value, ..."`` settings runs, each with the first mode (then ``modes`` are not
    compared). ``changed_prompt``: the prompt the scored candidate changes (any but the answer prompt)
    (default: the system's first). ``progress`` gets progress lines (None: silent)."""
    say = progress or (lambda message: None)
    bad = [m for m in modes if m not in SPECULATIVE_MODES]
    if bad or not modes:
        raise ConfigError("--modes", None, f"unknown mode {bad[0] if bad else ''!r}; choose from {SPECULATIVE_MODES}")
    if judge not in JUDGE_KINDS:
        raise ConfigError("--judge", None, f"unknown judge {judge!r}; choose from {JUDGE_KINDS}")
    runs = [parse_variant(v) for v in variants]
    for run in runs:
        resolve_settings(get_system(system), run.settings, source=f"--variant {run.label}")
    measured: list[str | Variant] = [Variant(run.label, modes[0], run.settings) for run in runs] or list(modes)
    prompts = get_system(system).prompts()
    ingestion = [c for c in prompts if c != "question_answering"]
    if changed_prompt is not None and changed_prompt not in ingestion:
        raise ConfigError("--changed-prompt", None, f"{system} has no prompt {changed_prompt!r} besides its answer prompt; "
                          f"choose from {ingestion}")
    conv, turns = _conversation(dataset, conversation, sessions)
    qas = list(conv.scored_qa()[:questions])
    if not qas:
        raise ConfigError("--sessions", None, f"no scored question of {conv.id} has its evidence in the first "
                          f"{sessions} session(s); ingest more sessions")
    loaded: dict[str, EmbeddedLlama] = {}

    def make_lm(mode: str) -> EmbeddedLlama:
        for other in list(loaded.values()):
            other.close()  # one model in memory at a time, each timed alone
        loaded.clear()
        loaded[mode] = EmbeddedLlama(model, threads=threads, speculative=mode)
        return loaded[mode]

    labels = [run.label for run in runs] or list(modes)
    say(f"bench-lm: {system} on {conv.id}, {sessions} session(s) = {turns} turns, {len(qas)} question(s); "
        f"{'variants' if runs else 'modes'} {', '.join(labels)}")
    spec = measure_variants(system, conv, qas, make_lm, measured, turns=turns, judge=judge)
    graph = spec.pop("graph")
    result: dict[str, Any] = {
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "load_average_1m": round(os.getloadavg()[0], 2)},
        "model": model, "speculation": spec,
    }
    for mode, row in spec["modes"].items():
        result[f"{system}.speedup_per_turn.{mode}"] = row["speedup_per_turn"]
        if row.get("prefill_decode"):
            result[f"{system}.decode_free_bound.{mode}"] = row["prefill_decode"].get("decode_free_bound")
    if ingestion and scoped_replay:
        lm = make_lm(modes[0])
        target = changed_prompt or ingestion[0]
        changed = {target: prompts[target] + CHANGED_RULE}
        say(f"bench-lm: scoring a changed {target} prompt on {len(qas)} question(s), scoped then full replay")
        scoped = measure_scoped_replay(system, conv, graph, qas, changed, lm)
        result["scoped_replay"] = scoped
        result["scoped_replay.ratio_to_full"] = scoped["ratio_lm_calls"]
    for lm in loaded.values():
        lm.close()
    return result
