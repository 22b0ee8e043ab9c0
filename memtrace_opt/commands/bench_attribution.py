"""``memtrace-opt bench-attribution CONFIG``: how well each attribution method finds the faulty op.

Parses the options, runs :func:`memtrace_opt.bench.attribution_run.run_attribution_bench` (systems run on
the configs' slices, cases with ground truth, every method on the same cases) and shows its payload:
one table row per method with accuracy and cost per case, or the JSON with ``--json``.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from memtrace_opt.bench.choices import ALL_METHODS, SYSTEMS
from memtrace_opt.errors import ConfigError

__all__ = ["bench_table", "register"]


def _split(value: str | None, allowed: tuple[str, ...], option: str) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise ConfigError(option, None, f"unknown value {bad[0] if bad else value!r}; choose from {', '.join(allowed)}")
    return items


def bench_table(payload: dict[str, Any]) -> Any:
    """One row per method: accuracies and cost per case, then per-type accuracy columns."""
    from rich.table import Table

    group = "by_class" if payload.get("config", {}).get("suite") == "hard" else "by_type"
    types = sorted({t for row in payload["rows"] for t in row.get(group, {})})
    table = Table(title=f"attribution benchmark: {payload['cases']} cases "
                        f"({', '.join(f'{s} {sum(c.values())}' for s, c in payload['case_counts'].items())})")
    for col in ("method", "type acc", "op acc", "failed", "LM calls", "tokens", "s/case", *types):
        table.add_column(col, justify="left" if col == "method" else "right")

    def pct(x: Any) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    for row in payload["rows"]:
        by_type = row.get(group, {})
        table.add_row(row["method"], pct(row.get("type_accuracy")), pct(row.get("op_accuracy")), str(row.get("failed", 0)),
                      f"{row.get('llm_calls_per_case', 0):.1f}", f"{row.get('tokens_per_case', 0):.0f}",
                      f"{row.get('seconds_per_case', 0):.2f}",
                      *[f"{pct(by_type[t].get('type_accuracy'))}/{pct(by_type[t].get('op_accuracy'))}" if t in by_type
                        else "-" for t in types])
    table.caption = f"per-{'class' if group == 'by_class' else 'type'} columns: type accuracy / op accuracy (%)"
    return table


def register(app: typer.Typer) -> None:
    """Add the ``bench-attribution`` command to the CLI."""

    @app.command("bench-attribution")
    def bench_command(
        ctx: typer.Context,
        config: Annotated[list[str], typer.Argument(help="Run config(s) (YAML): dataset slice, models, judge. "
                                                         "Several configs pool their cases.")],
        systems: Annotated[Optional[str], typer.Option("--systems", help=f"Comma list of {', '.join(SYSTEMS)} "
                                                                         "(default: the config's system).")] = None,
        methods: Annotated[Optional[str], typer.Option("--methods", help=f"Comma list of {', '.join(ALL_METHODS)}.")] = None,
        max_cases: Annotated[int, typer.Option("--max-cases", help="Injected cases wanted, over all systems.")] = 100,
        max_real: Annotated[int, typer.Option("--max-real", help="Real failures with clear ground truth, at most.")] = 50,
        evidence: Annotated[str, typer.Option("--evidence", help="annotated or pseudo.")] = "annotated",
        out: Annotated[Optional[str], typer.Option("--out", help="JSON path (default RUN_DIR/attribution_bench.json).")] = None,
        export: Annotated[Optional[str], typer.Option("--export", help="Benchmark directory to write.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the JSON instead of the table.")] = False,
        full_replay: Annotated[bool, typer.Option("--full-replay", help="Replay each injection over the whole "
                                                  "conversation, re-answering every question (slower).")] = False,
        max_replay_calls: Annotated[Optional[int], typer.Option(
            "--max-replay-calls", min=1, help="Skip an injection (and leave a counterfactual fix unverified) whose "
                                              "replay needs more LM calls than this.")] = None,
        suite: Annotated[str, typer.Option("--suite", help="easy (evidence dropped) or hard (partial, other "
                                                         "speaker, meaning changed, index write, trim, judged "
                                                         "wrongly; reported per class).")] = "easy",
        quiet: Annotated[bool, typer.Option("--quiet", help="No progress lines.")] = False,
    ) -> None:
        """Benchmark the attribution methods on injected and real failures with ground truth."""
        from memtrace_opt.bench.attribution_run import run_attribution_bench
        from memtrace_opt.commands.console import Reporter

        if evidence not in ("annotated", "pseudo"):
            raise ConfigError("--evidence", None, f"expected annotated or pseudo, got {evidence!r}")
        if suite not in ("easy", "hard"):
            raise ConfigError("--suite", None, f"expected easy or hard, got {suite!r}")
        report = Reporter(quiet=quiet, as_json=as_json)
        payload = run_attribution_bench(
            config, systems=_split(systems, SYSTEMS, "--systems"), methods=_split(methods, ALL_METHODS, "--methods"),
            max_cases=max_cases, max_real=max_real, evidence=evidence, out=out, export=export, focus=not full_replay,
            max_replay_calls=max_replay_calls, suite=suite, progress=report.progress, injected=ctx.obj)
        report.result(payload, bench_table(payload))
        recall = payload["pseudo_evidence_recall"]
        if recall["n"]:
            report.note(f"pseudo-evidence recall@{recall['k']}: {recall['mean']:.3f} over {recall['n']} cases")
        for key, reasons in payload["skipped"].items():
            report.note(f"skipped {key}: " + "; ".join(f"{why} ×{n}" for why, n in reasons.items()))
        report.summary(f"bench-attribution: {payload['cases']} cases, {len(payload['rows'])} methods · "
                       f"wrote {payload['out']}")
