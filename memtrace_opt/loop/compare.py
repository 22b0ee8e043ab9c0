"""Compare finished loop runs: method × system → held-out accuracy and gain over no optimization.

Each run dir's ``final.json`` holds, per held-out question, the score of the seed prompts and of
the best prompts, evaluated with the same settings on the same questions. The gain is best minus
seed, with a 95% paired bootstrap CI and a two-sided paired bootstrap p-value over those questions
(:func:`memtrace_opt.eval.metrics.paired_bootstrap`). The seed evaluation *is* "no optimization"
(the ``none`` method computes nothing else), so every row carries its own baseline; rows of the
same system are flagged when their baselines disagree (different settings or data: not comparable).

Each run other than the ``unattributed`` ablation is also paired with that ablation's run of the same
system: its best prompts' held-out scores minus the ablation's, over the questions both evaluated (by
``qa_id``), with the same bootstrap (``*_vs_unattributed``): what attribution adds over sending every
failure to every prompt. Several ablation runs of a system (seeds) pair by the config's seed. Beside
accuracy, each row says where the run's effort went (:mod:`memtrace_opt.loop.routing`): the prompts
the best set changed and the blame share per prompt component.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrace_opt.errors import ConfigError
from memtrace_opt.eval.metrics import paired_bootstrap
from memtrace_opt.loop.routing import RunRouting, read_routing
from memtrace_opt.rundir import FINAL_FILE, FinalReport, read_final

__all__ = ["CompareRow", "compare_finals", "compare_runs", "load_final", "render_table"]

UNATTRIBUTED = "unattributed"  # the ablation every other method is paired with


@dataclass(frozen=True)
class CompareRow:
    """One run: accuracy without and with optimization, the paired gain, and what it cost."""

    run_dir: str
    method: str
    system: str
    n: int
    seed_accuracy: float
    accuracy: float
    gain: float
    gain_ci: tuple[float, float]
    p_value: float
    rollouts: int
    llm_calls: int
    tokens: int
    wall_s: float
    changed: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    #: rollouts spent optimizing (``rollouts`` less the held-out evaluation) and the budget that bounds them;
    #: None for runs written before final.json kept them apart
    optimization_rollouts: int | None = None
    budget_rollouts: int | None = None
    #: best prompts' held-out accuracy minus the unattributed run's (``unattributed_run``), as a fraction like
    #: ``gain``, over the ``n_vs_unattributed`` questions both evaluated; None without such a run or question
    gain_vs_unattributed: float | None = None
    ci_vs_unattributed: tuple[float, float] | None = None
    p_vs_unattributed: float | None = None
    n_vs_unattributed: int | None = None
    unattributed_run: str | None = None
    #: routing (:mod:`memtrace_opt.loop.routing`); None where the run dir does not record it
    changed_prompts: dict[str, dict[str, int]] | None = None
    blame_share: dict[str, float] | None = None
    blamed_failures: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gain_ci"] = list(self.gain_ci)
        d["ci_vs_unattributed"] = list(self.ci_vs_unattributed) if self.ci_vs_unattributed else None
        return d


def load_final(run_dir: str | Path) -> FinalReport:
    """A run's final.json (any version, as ``memtrace-final/1``); a ConfigError naming the dir when the run has
    not finished, a DatasetError naming the file and field when it is malformed or newer than this version."""
    path = Path(run_dir) / FINAL_FILE
    if not path.exists():
        raise ConfigError(str(run_dir), None, f"no {FINAL_FILE}: not a finished optimize run (rerun it with --resume)")
    return read_final(path)


def compare_finals(finals: Mapping[str, Mapping[str, Any]], *, routing: Mapping[str, RunRouting] | None = None,
                   n_boot: int = 2000, seed: int = 0) -> list[CompareRow]:
    """Rows for ``{run dir: final.json content}`` (with each dir's ``routing`` where read), ordered by system
    then method; a ConfigError when several unattributed runs of a system leave a run's pairing ambiguous."""
    routing = routing or {}
    rows = [_with_routing(_row(name, final, n_boot, seed), routing.get(name)) for name, final in finals.items()]
    rows = _flag_baselines(rows, finals)
    rows = _pair_unattributed(rows, finals, routing, n_boot, seed)
    return sorted(rows, key=lambda r: (r.system, r.method, r.run_dir))


@dataclass(frozen=True)
class HeldoutEffect:
    """The optimized prompts' paired held-out gain over the seed's: mean, 95% CI, p, questions fixed and broken."""

    gain: float
    ci: tuple[float, float]
    p_value: float
    fixed: int
    broken: int

    def text(self) -> str:
        """``+12.5 points, paired bootstrap 95% CI [-8.3, +33.3], p = 0.317 · 5 questions fixed, 2 broken``."""
        low, high = self.ci
        return (f"{100 * self.gain:+.1f} points, paired bootstrap 95% CI [{100 * low:+.1f}, {100 * high:+.1f}], "
                f"p = {self.p_value:.3f} · {self.fixed} questions fixed, {self.broken} broken")


def heldout_effect(final: Mapping[str, Any]) -> HeldoutEffect:
    """The effect a final.json records (its cases' seed and best scores, paired by question)."""
    row = _row("", final, 2000, 0)
    cases = final.get("cases") or []
    return HeldoutEffect(row.gain, row.gain_ci, row.p_value,
                         sum(1 for c in cases if c["best_score"] > c["seed_score"]),
                         sum(1 for c in cases if c["best_score"] < c["seed_score"]))


def compare_runs(run_dirs: Sequence[str | Path], **kw: Any) -> list[CompareRow]:
    """Rows of finished run dirs: their final.json plus the routing their checkpoint and round blame record."""
    finals = {str(d): load_final(d) for d in run_dirs}
    return compare_finals(finals, routing={str(d): read_routing(d) for d in run_dirs}, **kw)


def _row(name: str, final: Mapping[str, Any], n_boot: int, seed: int) -> CompareRow:
    cases = final.get("cases") or []
    seed_scores = {c["qa_id"]: float(c["seed_score"]) for c in cases}
    best_scores = _best_scores(final)
    if cases:
        pc = paired_bootstrap(seed_scores, best_scores, n=n_boot, seed=seed)
        gain, ci, p = pc.mean_diff, (pc.ci_low, pc.ci_high), pc.p_value
    else:
        gain, ci, p = 0.0, (0.0, 0.0), 1.0
    spend = final.get("spend") or {}
    n = len(cases)
    return CompareRow(
        run_dir=name, method=str(final.get("method", "?")), system=str(final.get("system", "?")), n=n,
        seed_accuracy=sum(seed_scores.values()) / n if n else 0.0,
        accuracy=sum(best_scores.values()) / n if n else 0.0, gain=gain, gain_ci=ci, p_value=p,
        rollouts=int(spend.get("rollouts", 0)), llm_calls=int(spend.get("llm_calls", 0)),
        tokens=int(spend.get("prompt_tokens", 0)) + int(spend.get("completion_tokens", 0)),
        wall_s=float(spend.get("wall_s", 0.0)), changed=list(final.get("changed_components") or []),
        stop_reason=final.get("stop_reason"),
        optimization_rollouts=(int(final["optimization_spend"].get("rollouts", 0))
                               if "optimization_spend" in final else None),  # a number map: read_final checks it
        budget_rollouts=(final.get("budget") or {}).get("rollouts"),
    )


def _with_routing(row: CompareRow, routing: RunRouting | None) -> CompareRow:
    if routing is None:
        return row
    return replace(row, changed_prompts=routing.changed_prompts, blame_share=routing.blame_share,
                   blamed_failures=routing.blamed_failures)


def _flag_baselines(rows: list[CompareRow], finals: Mapping[str, Mapping[str, Any]]) -> list[CompareRow]:
    """Warn when runs of one system were not evaluated on the same questions with the same baseline."""
    by_system: dict[str, list[CompareRow]] = {}
    for r in rows:
        by_system.setdefault(r.system, []).append(r)
    out = []
    for r in rows:
        peers = by_system[r.system]
        ids = {p.run_dir: sorted(c["qa_id"] for c in finals[p.run_dir].get("cases", [])) for p in peers}
        warnings = list(r.warnings)
        if len({tuple(v) for v in ids.values()}) > 1:
            warnings.append("held-out questions differ between runs of this system")
        if len({round(p.seed_accuracy, 9) for p in peers}) > 1:
            warnings.append("no-optimization baselines differ between runs of this system (settings or data)")
        budgets = {p.budget_rollouts for p in peers if p.method != "none" and p.budget_rollouts is not None}
        if r.method != "none" and len(budgets) > 1:
            warnings.append(f"rollout budgets differ between methods of this system ({sorted(budgets)}): "
                            "not an equal-budget comparison")
        out.append(CompareRow(**{**asdict(r), "gain_ci": r.gain_ci, "warnings": warnings}))
    return out


def _pair_unattributed(rows: list[CompareRow], finals: Mapping[str, Mapping[str, Any]],
                       routing: Mapping[str, RunRouting], n_boot: int, seed: int) -> list[CompareRow]:
    """Each non-ablation row with its paired held-out difference against the unattributed run of its system
    (grouped by system as :func:`_flag_baselines` groups); a warning where the two share no question."""
    ablations: dict[str, list[CompareRow]] = {}
    for r in rows:
        if r.method == UNATTRIBUTED:
            ablations.setdefault(r.system, []).append(r)
    out = []
    for r in rows:
        base = None if r.method == UNATTRIBUTED else _ablation_for(r, ablations.get(r.system, []), routing)
        if base is None:
            out.append(r)
            continue
        paired = _paired_vs(_best_scores(finals[base.run_dir]), _best_scores(finals[r.run_dir]), n_boot, seed)
        if paired is None:
            out.append(replace(r, unattributed_run=base.run_dir, warnings=[
                *r.warnings, f"shares no held-out question with unattributed run {base.run_dir}: no paired comparison"]))
            continue
        gain, ci, p, n = paired
        out.append(replace(r, gain_vs_unattributed=gain, ci_vs_unattributed=ci, p_vs_unattributed=p,
                           n_vs_unattributed=n, unattributed_run=base.run_dir))
    return out


def _ablation_for(row: CompareRow, ablations: Sequence[CompareRow],
                  routing: Mapping[str, RunRouting]) -> CompareRow | None:
    """The one unattributed run ``row`` pairs with: the only one, else the one of the same seed."""
    if len(ablations) <= 1:
        return ablations[0] if ablations else None
    seed = _run_seed(row.run_dir, routing)
    same = [a for a in ablations if seed is not None and _run_seed(a.run_dir, routing) == seed]
    if len(same) == 1:
        return same[0]
    raise ConfigError(row.run_dir, None, f"{len(ablations)} unattributed runs of system {row.system} "
                                         f"({', '.join(a.run_dir for a in ablations)}) and {len(same)} with this "
                                         f"run's seed ({seed}): compare one unattributed run per seed")


def _run_seed(run_dir: str, routing: Mapping[str, RunRouting]) -> int | None:
    found = routing.get(run_dir)
    return found.seed if found is not None else None


def _best_scores(final: Mapping[str, Any]) -> dict[str, float]:
    return {c["qa_id"]: float(c["best_score"]) for c in final.get("cases") or []}


def _paired_vs(base: Mapping[str, float], run: Mapping[str, float], n_boot: int,
               seed: int) -> tuple[float, tuple[float, float], float, int] | None:
    """``(mean run − base, 95% CI, p, n)`` over the questions both hold; None when they share none."""
    common = sorted(set(base) & set(run))
    if not common:
        return None
    pc = paired_bootstrap({q: base[q] for q in common}, {q: run[q] for q in common}, n=n_boot, seed=seed)
    return pc.mean_diff, (pc.ci_low, pc.ci_high), pc.p_value, pc.n


def render_table(rows: Sequence[CompareRow]) -> Any:
    """A rich Table of the rows (accuracies and gains in percentage points), captioned with what the
    ``vs unattr.`` column could not pair."""
    from rich.table import Table

    table = Table(title="Held-out accuracy: optimized vs no optimization (same questions, paired)",
                  caption=_vs_note(rows))
    for col in ("system", "method", "n", "no-opt", "optimized", "gain [95% CI]", "p", "vs unattr.",
                "rollouts (opt/budget)", "LM calls", "tokens", "wall s", "changed", "blame"):
        table.add_column(col, justify="left" if col in ("system", "method", "changed", "blame") else "right",
                         overflow="fold")
    for r in rows:
        table.add_row(
            r.system, r.method, str(r.n), f"{100 * r.seed_accuracy:.1f}", f"{100 * r.accuracy:.1f}",
            _gain_cell(r.gain, r.gain_ci), f"{r.p_value:.3f}", _vs_cell(r),
            _rollouts_cell(r), str(r.llm_calls), str(r.tokens), f"{r.wall_s:.0f}", _changed_cell(r), _blame_cell(r),
        )
    return table


def _gain_cell(gain: float, ci: tuple[float, float]) -> str:
    """``+30.0 [+10.0, +50.0]``: a fraction as signed percentage points with its CI."""
    return f"{100 * gain:+.1f} [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"


def _vs_cell(row: CompareRow) -> str:
    if row.gain_vs_unattributed is None or row.ci_vs_unattributed is None:
        return "-"
    return f"{_gain_cell(row.gain_vs_unattributed, row.ci_vs_unattributed)} p {row.p_vs_unattributed:.3f} " \
           f"n {row.n_vs_unattributed}"


def _vs_note(rows: Sequence[CompareRow]) -> str | None:
    """One short line: the systems without an unattributed run, and the pairs sharing no question."""
    unpaired = sorted({r.system for r in rows if r.method != UNATTRIBUTED and r.unattributed_run is None})
    disjoint = [r.run_dir for r in rows if r.unattributed_run is not None and r.n_vs_unattributed is None]
    notes = ([f"no unattributed run of {', '.join(unpaired)} among these dirs"] if unpaired else []) + \
        ([f"no question shared with the unattributed run: {', '.join(disjoint)}"] if disjoint else [])
    return "vs unattr.: " + "; ".join(notes) if notes else None


def _changed_cell(row: CompareRow) -> str:
    """``question_answering(+3/-1)`` per changed prompt; the bare names where the run dir gave no counts."""
    if row.changed_prompts is None:
        return ", ".join(row.changed) or "-"
    return ", ".join(f"{c}(+{d['added_lines']}/-{d['removed_lines']})" for c, d in row.changed_prompts.items()) or "-"


def _blame_cell(row: CompareRow) -> str:
    """``fact_extraction 0.60, memory_update 0.30 (n 10)``; the ablation says what it records instead."""
    if row.blame_share is not None:
        return ", ".join(f"{c} {share:.2f}" for c, share in row.blame_share.items()) + f" (n {row.blamed_failures})"
    ablation = row.method == UNATTRIBUTED and row.blamed_failures is not None  # its rounds did record labels
    return "every failure to every prompt" if ablation else "-"


def _rollouts_cell(row: CompareRow) -> str:
    """All rollouts, then the optimization's share against its budget where the run recorded them."""
    if row.optimization_rollouts is None:
        return str(row.rollouts)
    return f"{row.rollouts} ({row.optimization_rollouts}/{row.budget_rollouts if row.budget_rollouts else '-'})"
