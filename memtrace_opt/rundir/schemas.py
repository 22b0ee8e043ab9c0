"""One versioned schema per JSON file kind of a run directory: its id, the stamp, and its one reader.

Run directories outlive the code that wrote them (experiment runs are kept and re-reported months
later), and each file is read by commands other than its writer: the loop writes ``blame.json``
rounds that ``report`` reads, ``attribute`` writes the ``blame.json`` that ``report`` and ``export
otel`` read, ``compare`` reads the loop's ``final.json``. So every file names its shape the way
``results.json`` does (``"format": "<kind>/<version>"``), writers stamp it with :func:`stamp`, and
every reader goes through the kind's reader here: an older file is converted to the current shape,
a newer or unknown one is refused with one line naming the file and the field, instead of each
reader guessing among shapes.

- ``blame.json`` and ``rounds/round_<k>/blame.json``: ``memtrace-blame/2``, one shape for a run's and a
  round's blame: ``signals`` (BlameSignal dicts), ``aggregate`` (grouped blame,
  :func:`memtrace_opt.attribution.aggregate.aggregate`'s shape) and ``verification_failed``; a run's
  file adds ``method``, ``counterfactual``, ``evidence``, ``notes``, a round's ``failures``,
  ``components`` (what the round optimizes) and ``not_attributed``.
- ``final.json``: ``memtrace-final/1``, the held-out ``cases`` (``qa_id``, ``seed_score``,
  ``best_score``, ...) with accuracies, changed components and spend; optionally ``audit``, the
  rejected candidates' held-out scores (:mod:`memtrace_opt.loop.audit`).
- ``checkpoint.json``: ``memtrace-loop/1``, the loop's state (:class:`~memtrace_opt.loop.checkpoint.LoopState`).
- ``rounds/round_<k>/scores.json``: ``memtrace-round-scores/1``, ``validation`` (and ``train``)
  ``{question id: score}``.
- ``rounds/round_<k>/optimizer.json``: ``memtrace-round-optimizer/1``, what GEPA/MIPROv2 did.

``results.json`` (``memtrace-results/1``) is read by :func:`memtrace_opt.rundir.files.read_results` into
its record type, :class:`~memtrace_opt.eval.results.QAResult`; graph files by :mod:`memtrace_opt.graph.io_json`.
The shapes the readers return are the TypedDicts of :mod:`.records`.

A file without ``format`` is legacy, written before its kind was stamped; it is read as the
kind's ``legacy`` version and converted: blame files were version 1 (a round's signals keyed by
question and its grouped blame under ``summary``, the old grouping's keys; a bare list of signals),
an unstamped ``final.json`` version 0 (rows optional). A new version means: bump ``version`` and add
an upgrade from the previous one to ``upgrades``; no caller changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from memtrace_opt.attribution.aggregate import aggregate
from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.errors import DatasetError
from memtrace_opt.rundir.jsonio import JSONObject, JSONValue, read_json
from memtrace_opt.rundir.records import BlameFile, CheckpointFile, FinalReport, RoundScores

__all__ = ["BLAME", "CHECKPOINT", "FINAL", "ROUND_OPTIMIZER", "ROUND_SCORES", "Schema", "convert", "read",
           "read_blame", "read_checkpoint", "read_final", "read_round_optimizer", "read_round_scores", "stamp"]


#: The shape a schema's reader returns (a TypedDict of :mod:`.records`, or a plain JSON object).
T = TypeVar("T")


class Malformed(ValueError):
    """A payload field does not have the schema's shape (``where`` names it, dotted)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where, self.message = where, message


@dataclass(frozen=True)
class Schema(Generic[T]):
    """One file kind: its name and current version, the check of the current shape, and the upgrades.

    ``legacy`` is the version an unstamped file is read as (None: an unstamped file is refused);
    ``upgrades[v]`` turns a version-``v`` payload into version ``v + 1``. ``T`` is the shape ``check``
    guarantees, the type :func:`read` returns.
    """

    name: str
    version: int
    what: str
    check: Callable[[JSONObject], None]
    legacy: int | None = None
    upgrades: Mapping[int, Callable[[JSONValue], JSONValue]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.name}/{self.version}"


def stamp(schema: Schema[T], payload: Mapping[str, object]) -> T:
    """``payload`` with ``"format": schema.id`` first (replacing any stamp it had): what a writer of the kind
    writes. The payload is the writer's claim to have the kind's shape; its reader checks it."""
    return cast(T, {"format": schema.id, **{k: v for k, v in payload.items() if k != "format"}})


def read(schema: Schema[T], path: str | Path) -> T:
    """The file at ``path`` in ``schema``'s current shape; DatasetError naming the file and field otherwise."""
    return convert(schema, read_json(path), str(path))


def convert(schema: Schema[T], payload: JSONValue, source: str) -> T:
    """``payload`` (as read from ``source``) upgraded to the current version, checked, and stamped."""
    version = _version(schema, payload, source)
    try:
        for v in range(version, schema.version):
            payload = schema.upgrades[v](payload)
        if not isinstance(payload, dict):
            raise Malformed("top level", f"expected a JSON object, got {_kind(payload)}")
        schema.check(payload)
    except Malformed as err:
        raise DatasetError(source, err.where, f"{err.message} (not a {schema.id} {schema.what})") from None
    return stamp(schema, payload)


def _version(schema: Schema[Any], payload: JSONValue, source: str) -> int:
    """The version ``payload`` claims (its kind's legacy version when unstamped); refuses others."""
    found = payload.get("format") if isinstance(payload, dict) else None
    if found is None:
        if schema.legacy is None:
            what = "no format field" if isinstance(payload, dict) else f"a JSON {_kind(payload)}, not an object"
            raise DatasetError(source, "format", f"{what}; expected a {schema.what} ({schema.id})")
        return schema.legacy
    name, _, number = str(found).partition("/")
    if name != schema.name or not number.isdigit():
        raise DatasetError(source, "format", f"{found!r} is not a {schema.what} ({schema.id})")
    version = int(number)
    if version > schema.version:
        raise DatasetError(source, "format", f"{found} is newer than this memtrace-opt reads ({schema.id}); "
                                             "upgrade memtrace-opt")
    if any(v not in schema.upgrades for v in range(version, schema.version)):
        raise DatasetError(source, "format", f"{found} is older than any {schema.what} this version converts")
    return version


# -- field checks -------------------------------------------------------------------------------------
_TYPES: dict[type, str] = {dict: "an object", list: "a list", str: "a string", int: "an integer"}
_KINDS: dict[type, str] = {dict: "object", list: "list", str: "string"}


def _kind(value: Any) -> str:
    """The JSON name of ``value``'s type, for messages."""
    return _KINDS.get(type(value), type(value).__name__)


def _get(obj: Mapping[str, Any], key: str, kind: type, where: str, *, default: Any = ...) -> Any:
    """``obj[key]`` when it is a ``kind`` (``default`` when absent and given); Malformed naming ``where``."""
    if key not in obj and default is not ...:
        return default
    if key not in obj:
        raise Malformed(where, "missing")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise Malformed(where, f"expected {_TYPES.get(kind, kind.__name__)}, got {_kind(value)}")
    return value


def _number(obj: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> None:
    """``obj[key]`` is a number (or absent, when ``optional``)."""
    if key not in obj:
        if optional:
            return
        raise Malformed(where, "missing")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Malformed(where, f"expected a number, got {_kind(value)}")


def _number_map(obj: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> None:
    """``obj[key]`` maps names to numbers (or is absent, when ``optional``)."""
    values = _get(obj, key, dict, where, default={} if optional else ...)
    for name in values:
        _number(values, name, f"{where}.{name}")


def _objects(values: list[Any], where: str) -> list[dict[str, Any]]:
    for i, value in enumerate(values):
        if not isinstance(value, dict):
            raise Malformed(f"{where}[{i}]", f"expected an object, got {_kind(value)}")
    return values


# -- blame.json -----------------------------------------------------------------------------------------
def _check_blame(p: dict[str, Any]) -> None:
    _objects(_get(p, "signals", list, "signals"), "signals")
    _get(p, "verification_failed", int, "verification_failed")
    agg = _get(p, "aggregate", dict, "aggregate")
    _get(agg, "total", int, "aggregate.total")
    for name, group in _get(agg, "components", dict, "aggregate.components").items():
        _check_group(group, f"aggregate.components.{name}")
    _check_group(_get(agg, "unoptimizable", dict, "aggregate.unoptimizable"), "aggregate.unoptimizable")
    unattributed = _get(agg, "unattributed", dict, "aggregate.unattributed")
    _get(unattributed, "count", int, "aggregate.unattributed.count")
    _get(unattributed, "case_ids", list, "aggregate.unattributed.case_ids")


def _check_group(group: Any, where: str) -> None:
    if not isinstance(group, dict):
        raise Malformed(where, f"expected an object, got {_kind(group)}")
    _get(group, "count", int, f"{where}.count")
    _number_map(group, "error_types", f"{where}.error_types")
    _get(group, "case_ids", list, f"{where}.case_ids")


def _blame_1_to_2(old: Any) -> Any:
    """Version 1 (unstamped): a run's ``{"signals": [...], "aggregate": ...}``; a round's ``{"signals":
    {question: signal}, "summary": ...}`` with ``verification_failed`` inside the summary; a bare list of
    signals. Rounds before the one grouping (aa6238b) grouped with ``cases`` for ``case_ids`` and no
    ``total``/``unattributed``; a file without grouped blame gets it computed from its signals."""
    payload = {"signals": old} if isinstance(old, list) else dict(old) if isinstance(old, dict) else old
    if not isinstance(payload, dict):
        return payload
    signals = payload.get("signals", [])
    signals = list(signals.values()) if isinstance(signals, dict) else signals
    grouped = payload.pop("summary", payload.get("aggregate"))
    if isinstance(grouped, dict):
        grouped = dict(grouped)
        payload.setdefault("verification_failed", grouped.pop("verification_failed", 0))
    payload.setdefault("verification_failed", 0)
    if isinstance(signals, list):
        payload["aggregate"] = _grouped_1(grouped, signals)
    payload["signals"] = signals
    return payload


def _grouped_1(old: Any, signals: list[Any]) -> Any:
    """Version-1 grouped blame in :func:`~memtrace_opt.attribution.aggregate.aggregate`'s shape."""
    if not isinstance(old, dict):
        return _aggregate_of(signals)
    failed = [s for s in signals if isinstance(s, dict) and s.get("error_type") is None]
    unattributed = {"count": len(failed), "case_ids": [s.get("case_id") for s in failed],
                    "reasons": list(dict.fromkeys(str(s.get("reason", "")) for s in failed))[:5]}
    components = old.get("components", {})
    if isinstance(components, dict):
        components = {name: _group_1(group) for name, group in components.items()}
    return {**old, "total": old.get("total", len(signals)), "components": components,
            "unoptimizable": _group_1(old.get("unoptimizable", {})),
            "unattributed": old.get("unattributed", unattributed)}


def _group_1(group: Any) -> Any:
    """One version-1 group (``cases`` for ``case_ids``; no reasons or op subgraphs in the oldest ones)."""
    if not isinstance(group, dict):
        return group
    rest = {k: v for k, v in group.items() if k != "cases"}
    return {"count": 0, "error_types": {}, "reasons": [], "op_subgraphs": [], **rest,
            "case_ids": group.get("case_ids", group.get("cases", []))}


def _aggregate_of(signals: list[Any]) -> dict[str, Any]:
    """Grouped blame of the signals that parse (the report notes the ones that do not)."""
    parsed = []
    for record in signals:
        try:
            parsed.append(BlameSignal.from_dict(record))
        except (TypeError, ValueError, AttributeError):
            continue
    return aggregate(parsed)


# -- final.json, checkpoint.json, round files -------------------------------------------------------------
def _check_final(p: dict[str, Any]) -> None:
    for i, case in enumerate(_objects(_get(p, "cases", list, "cases"), "cases")):
        _get(case, "qa_id", str, f"cases[{i}].qa_id")
        _number(case, "seed_score", f"cases[{i}].seed_score")
        _number(case, "best_score", f"cases[{i}].best_score")
    _number(p, "seed_accuracy", "seed_accuracy", optional=True)
    _number(p, "best_accuracy", "best_accuracy", optional=True)
    _number_map(p, "spend", "spend", optional=True)
    _number_map(p, "optimization_spend", "optimization_spend", optional=True)
    _get(p, "budget", dict, "budget", default={})
    _get(p, "changed_components", list, "changed_components", default=[])
    for i, entry in enumerate(_objects(_get(p, "audit", list, "audit", default=[]), "audit")):
        _number(entry, "accuracy", f"audit[{i}].accuracy")
        _number(entry, "gain", f"audit[{i}].gain")


def _final_0_to_1(old: Any) -> Any:
    """An unstamped final.json: the same fields, its per-question rows optional."""
    return {"cases": [], **old} if isinstance(old, dict) else old


def _check_checkpoint(p: dict[str, Any]) -> None:
    """The fields the loop does arithmetic or lookups on have the types it expects."""
    _get(p, "plan", dict, "plan")
    _get(p, "system", str, "system")
    _get(p, "settings", dict, "settings", default={})
    _number_map(p, "spend", "spend", optional=True)
    for name in ("seed_candidate", "best_candidate"):
        for component, text in _get(p, name, dict, name).items():
            if not isinstance(text, str):
                raise Malformed(f"{name}.{component}", f"expected prompt text, got {_kind(text)}")
    _objects(_get(p, "rounds", list, "rounds", default=[]), "rounds")
    if p.get("status", "running") not in ("running", "optimized", "done"):
        raise Malformed("status", f"{p.get('status')!r} is not running, optimized or done")


def _check_scores(p: dict[str, Any]) -> None:
    _number_map(p, "validation", "validation")
    _number_map(p, "train", "train", optional=True)


def _check_object(p: dict[str, Any]) -> None:
    """Any JSON object (the optimizer's own details)."""


BLAME: Schema[BlameFile] = Schema("memtrace-blame", 2, "blame file", _check_blame, legacy=1,
                                  upgrades={1: _blame_1_to_2})
FINAL: Schema[FinalReport] = Schema("memtrace-final", 1, "final.json", _check_final, legacy=0,
                                    upgrades={0: _final_0_to_1})
CHECKPOINT: Schema[CheckpointFile] = Schema("memtrace-loop", 1, "loop checkpoint", _check_checkpoint)
ROUND_SCORES: Schema[RoundScores] = Schema("memtrace-round-scores", 1, "round scores file", _check_scores, legacy=1)
ROUND_OPTIMIZER: Schema[JSONObject] = Schema("memtrace-round-optimizer", 1, "round optimizer file", _check_object,
                                             legacy=1)


def read_blame(path: str | Path) -> BlameFile:
    """A run's or a round's ``blame.json`` as ``memtrace-blame/2``."""
    return read(BLAME, path)


def read_final(path: str | Path) -> FinalReport:
    """A loop run's ``final.json`` as ``memtrace-final/1``."""
    return read(FINAL, path)


def read_checkpoint(path: str | Path) -> CheckpointFile:
    """A loop run's ``checkpoint.json`` as ``memtrace-loop/1`` (always stamped: an unstamped one is refused)."""
    return read(CHECKPOINT, path)


def read_round_scores(path: str | Path) -> RoundScores:
    """A round's ``scores.json`` as ``memtrace-round-scores/1``."""
    return read(ROUND_SCORES, path)


def read_round_optimizer(path: str | Path) -> JSONObject:
    """A round's ``optimizer.json`` as ``memtrace-round-optimizer/1``."""
    return read(ROUND_OPTIMIZER, path)
