"""``memtrace-opt estimate CONFIG --costs BENCH.json``: the LM time of a run, before it starts.

Sizes an experiment from per-unit costs measured on this machine by ``bench-lm --json`` (LM seconds
per ingested turn and per question) and the work the config implies, per method and per part
(seed ingestion, rollouts, re-ingestion, reflection, held-out); see :mod:`memtrace_opt.campaign.estimate`.
``--json`` prints the estimate as one object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

__all__ = ["register"]


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def register(app: typer.Typer) -> None:
    """Add ``estimate`` to the CLI."""

    @app.command("estimate")
    def estimate(
        config: Annotated[Path, typer.Argument(help="Run config (YAML).")],
        costs: Annotated[Path, typer.Option(help="A `bench-lm --json` result measured on this machine.")],
        method: Annotated[Optional[list[str]], typer.Option(help="Method to size (repeat it; default: the config's).")]
        = None,
        row: Annotated[Optional[str], typer.Option(help="The bench-lm row whose costs apply (default: its baseline).")]
        = None,
        reflection_s: Annotated[float, typer.Option(min=0, help="LM seconds per reflection call.")] = 30.0,
        scoped_ratio: Annotated[Optional[float], typer.Option(
            min=0, max=1, help="Scoped re-ingestion as a share of a full one (default: the file's, else 0.5).")] = None,
        dataset_path: Annotated[Optional[str], typer.Option(help="Dataset file (overrides dataset.path).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ) -> None:
        """Estimate a run's LM time per method and part from measured per-turn and per-question costs."""
        from memtrace_opt.commands.console import Reporter
        from memtrace_opt.campaign.estimate import estimate_config

        result = estimate_config(config, costs, methods=tuple(method or ()), row=row, reflection_s=reflection_s,
                              scoped_ratio=scoped_ratio, dataset_path=dataset_path)
        work = result["work"]
        lines = [f"{role}: {w['conversations']} conversation(s), {w['turns']} turns, {w['questions']} questions"
                 for role, w in work.items()]
        lines.append(f"costs ({result['costs']['source']}): {result['costs']['seconds_per_turn']} s/turn, "
                     f"{result['costs']['seconds_per_question']} s/question")
        for m in result["methods"]:
            lines.append(f"{m['method']}: {_hours(m['low_s'])} to {_hours(m['high_s'])} (seed ingestion "
                         f"{_hours(m['seed_ingestion_s'])}, rollouts {_hours(m['rollout_s'])}, re-ingestion up to "
                         f"{_hours(m['reingestion_s'])}, reflection {_hours(m['reflection_s'])}, held-out "
                         f"{_hours(m['heldout_s'])})")
        report = Reporter(as_json=as_json)
        report.result(result, *lines)
        report.summary(f"estimate: {result['config']}, {len(result['methods'])} method(s), "
                       f"{_hours(result['total_low_s'])} to {_hours(result['total_high_s'])} of LM time")
