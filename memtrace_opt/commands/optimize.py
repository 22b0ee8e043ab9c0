"""``memtrace-opt optimize CONFIG``: the closed loop — attribute failures, optimize the blamed prompts.

The work is :func:`memtrace_opt.run.optimize` (the same steps as the Python API: the loop, then the
held-out attribution); this module parses the options and prints the rounds, the held-out comparison
of seed vs optimized prompts, the spend and the held-out blame. ``--method`` runs a baseline instead of
the config's method; ``--resume`` continues a killed run from its checkpoint; ``--tuning-from`` reuses
another run's tuned settings so every method is compared with the same ones.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

__all__ = ["kept_nothing_line", "register", "rounds_table"]


def rounds_table(state: Any) -> Any:
    """The rounds as a rich table (details per round are in RUN_DIR/rounds/round_<k>/)."""
    from rich.table import Table

    table = Table(title=f"{state.system}: {state.plan['method']} — validation accuracy per round")
    for col in ("round", "failures", "blamed → optimized", "val %", "kept", "rollouts", "LM calls"):
        table.add_column(col, justify="left" if col == "blamed → optimized" else "right")
    table.add_row("0", "-", "(seed prompts)", f"{100 * (state.baseline_val or 0):.1f}", "seed", "-", "-")
    for r in state.rounds:
        blamed = ", ".join(f"{k} {v}" for k, v in r.blamed.items())
        if r.unoptimizable:
            blamed += f"{', ' if blamed else ''}unoptimizable {r.unoptimizable}"
        detail = f"{blamed or '-'} → {', '.join(r.optimized) or 'nothing'}"
        if r.note not in ("gepa", "miprov2"):
            detail += f" ({r.note})"
        table.add_row(str(r.index), str(r.failures), detail, f"{100 * r.val_score:.1f}",
                      "yes" if r.improved else "no", str(r.spend.get("rollouts", 0)), str(r.spend.get("llm_calls", 0)))
    return table


def register(app: typer.Typer) -> None:
    """Add the ``optimize`` command to the CLI."""

    @app.command("optimize")
    def optimize_command(
        ctx: typer.Context,
        config: Annotated[str, typer.Argument(help="Run config (YAML).")],
        method: Annotated[Optional[str], typer.Option(
            "--method", help="attributed | unattributed | answer_feedback | miprov2 | none (default: the config's).")
        ] = None,
        resume: Annotated[bool, typer.Option(
            "--resume/--no-resume", help="Continue the run checkpointed in the run dir (the default, as for eval); "
                                         "--no-resume refuses a run dir that holds one.")] = True,
        out: Annotated[Optional[str], typer.Option("--out", help="Run directory (default: output_dir/run_name).")] = None,
        tuning_from: Annotated[Optional[str], typer.Option(
            "--tuning-from", help="Reuse the tuned settings (tuning.json) of another run dir.")] = None,
        dataset_path: Annotated[Optional[str], typer.Option("--dataset-path",
                                                            help="Dataset file, overriding dataset.path.")] = None,
        cache_dir: Annotated[Optional[str], typer.Option(
            "--cache-dir", help="LM disk cache directory (default: cache_dir or the run dir); share it across methods.")
        ] = None,
        attribute: Annotated[bool, typer.Option(
            "--attribute/--no-attribute", help="Attribute the held-out failures of the final prompts (blame.json).")
        ] = True,
        force: Annotated[bool, typer.Option("--force", help="With --resume: accept a changed config (recorded in "
                                                            "config_changes.json).")] = False,
        prompts_from: Annotated[Optional[str], typer.Option(
            "--prompts-from", help="With --method none: compare another run's best prompts (RUN_DIR/prompts) with "
                                   "the seed on this config's held-out set (re-test on fresh data).")] = None,
        quiet: Annotated[bool, typer.Option("--quiet", help="No progress lines.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print final.json (without per-question cases) "
                                                             "instead of the tables.")] = False,
    ) -> None:
        """Attribute failures, optimize the blamed prompts, compare seed vs optimized on held-out questions."""
        from memtrace_opt.attribution.aggregate import unoptimizable_line
        from memtrace_opt.commands.console import Reporter, injected_lms
        from memtrace_opt.loop.audit import audit_lines
        from memtrace_opt.loop.budget import spend_line
        from memtrace_opt.run import optimize

        report = Reporter(quiet=quiet, as_json=as_json)
        done = optimize(config, method=method, resume=resume, out=out, tuning_from=tuning_from, force=force,
                        dataset_path=dataset_path, cache_dir=cache_dir, prompts_from=prompts_from,
                        attribute_heldout=attribute, progress=report.progress, **injected_lms(ctx.obj))
        state, run_dir, final = done.state, done.run_dir, done.state.final or {}
        report.result({**final, "stop_reason": state.stop_reason, "spend": state.spend, "run_dir": str(run_dir)},
                      rounds_table(state))
        if done.effect is not None:
            report.note(f"effect: {done.effect.text()}")
        if final.get("n") and state.rounds and not final.get("changed_components"):
            report.note(kept_nothing_line(state))
        if final.get("audit"):
            report.note("\n".join(audit_lines(final["audit"], final.get("seed_accuracy", 0.0))))
        report.note(spend_line({**final, "spend": state.spend}))
        if done.heldout_blame is not None:
            report.note(f"held-out failures attributed: {done.heldout_blame.counts_line()} (blame.json)")
            beyond_prompts = unoptimizable_line(done.heldout_blame.aggregate)
            if beyond_prompts:
                report.note(beyond_prompts)
        report.summary(
            f"held-out ({final.get('n', 0)} questions): no optimization {100 * final.get('seed_accuracy', 0):.1f}% → "
            f"optimized {100 * final.get('best_accuracy', 0):.1f}% · changed: "
            f"{', '.join(final.get('changed_components') or []) or 'nothing'} · stop: {state.stop_reason} · "
            f"run dir: {run_dir}")


def kept_nothing_line(state: Any) -> str:
    """Why an optimized run changed nothing: how many candidates the loop tried and how the best one scored.

    "changed: nothing" alone reads like a loop that did no work; the candidate count and the
    validation scores say it searched and that selection, not idleness, kept the seed.
    """
    counted = [r for r in state.rounds if "candidates" in r.optimizer]  # GEPA counts its candidates, seed included
    tried = (f"{sum(max(0, int(r.optimizer['candidates']) - 1) for r in counted)} candidate prompt(s) tried over "
             if counted else "")
    best = max(r.val_score for r in state.rounds)
    return (f"kept nothing: {tried}{len(state.rounds)} round(s); the best round scored {100 * best:.1f}% on "
            f"validation, the seed {100 * (state.baseline_val or 0):.1f}% (a round is kept only when it beats the "
            f"best so far there)")
