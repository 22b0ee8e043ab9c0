"""Compare finished loop runs: method × system → held-out accuracy and gain over no optimization.

Each run dir's ``final.json`` holds, per held-out question, the score of the seed prompts and of
the best prompts, evaluated with the same settings on the same questions. The gain is best minus
seed, with a 95% paired bootstrap CI and a two-sided paired bootstrap p-value over those questions
(:func:`memtrace_opt.eval.metrics.paired_bootstrap`). The seed evaluation *is* "no optimization"
(the ``none`` method computes nothing else), so every row carries its own baseline; rows of the
same system are flagged when their baselines disagree (different settings or data: not comparable).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrace_opt.errors import ConfigError
from memtrace_opt.eval.metrics import paired_bootstrap
from memtrace_opt.loop.artifacts import FINAL_FILE
from memtrace_opt.schemas import read_final

__all__ = ["CompareRow", "compare_finals", "compare_runs", "load_final", "render_table"]


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

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gain_ci"] = list(self.gain_ci)
        return d


def load_final(run_dir: str | Path) -> dict[str, Any]:
    """A run's final.json (any version, as ``memtrace-final/1``); a ConfigError naming the dir when the run has
    not finished, a DatasetError naming the file and field when it is malformed or newer than this version."""
    path = Path(run_dir) / FINAL_FILE
    if not path.exists():
        raise ConfigError(str(run_dir), None, f"no {FINAL_FILE}: not a finished optimize run (rerun it with --resume)")
    return read_final(path)


def compare_finals(finals: Mapping[str, Mapping[str, Any]], *, n_boot: int = 2000, seed: int = 0) -> list[CompareRow]:
    """Rows for ``{run dir: final.json content}``, ordered by system then method."""
    rows = [_row(name, final, n_boot, seed) for name, final in finals.items()]
    rows = _flag_baselines(rows, finals)
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
    return compare_finals({str(d): load_final(d) for d in run_dirs}, **kw)


def _row(name: str, final: Mapping[str, Any], n_boot: int, seed: int) -> CompareRow:
    cases = final.get("cases") or []
    seed_scores = {c["qa_id"]: float(c["seed_score"]) for c in cases}
    best_scores = {c["qa_id"]: float(c["best_score"]) for c in cases}
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


def render_table(rows: Sequence[CompareRow]) -> Any:
    """A rich Table of the rows (accuracies and gains in percentage points)."""
    from rich.table import Table

    table = Table(title="Held-out accuracy: optimized vs no optimization (same questions, paired)")
    for col in ("system", "method", "n", "no-opt", "optimized", "gain [95% CI]", "p", "rollouts (opt/budget)",
                "LM calls", "tokens", "wall s", "changed"):
        table.add_column(col, justify="left" if col in ("system", "method", "changed") else "right")
    for r in rows:
        table.add_row(
            r.system, r.method, str(r.n), f"{100 * r.seed_accuracy:.1f}", f"{100 * r.accuracy:.1f}",
            f"{100 * r.gain:+.1f} [{100 * r.gain_ci[0]:+.1f}, {100 * r.gain_ci[1]:+.1f}]", f"{r.p_value:.3f}",
            _rollouts_cell(r), str(r.llm_calls), str(r.tokens), f"{r.wall_s:.0f}",
            ", ".join(r.changed) or "-",
        )
    return table


def _rollouts_cell(row: CompareRow) -> str:
    """All rollouts, then the optimization's share against its budget where the run recorded them."""
    if row.optimization_rollouts is None:
        return str(row.rollouts)
    return f"{row.rollouts} ({row.optimization_rollouts}/{row.budget_rollouts if row.budget_rollouts else '-'})"
