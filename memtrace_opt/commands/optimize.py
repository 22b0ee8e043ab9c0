"""``memtrace-opt optimize CONFIG``: the closed loop — attribute failures, optimize the blamed prompts.

Builds everything the loop needs from the run config (dataset slice and split, LM roles with the
disk cache in the run dir, the system backend, the attributor) and runs
:func:`memtrace_opt.loop.run_loop`. ``--method`` runs a baseline instead of the config's method;
``--resume`` continues a killed run from its checkpoint; ``--tuning-from`` reuses another run's
tuned settings so every method is compared with the same ones. Prints the rounds and the held-out
comparison of seed vs optimized prompts.

Tests run it without a model through :func:`injected` (LM clients by role, optional resources).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from memtrace_opt.commands.console import stamped
from memtrace_opt.commands.lms import injected
from memtrace_opt.config import RunConfig
from memtrace_opt.errors import ConfigError

__all__ = ["injected", "register", "run_optimize"]

def run_optimize(config: str | Path | RunConfig, *, method: str | None = None, resume: bool = True,
                 out: str | None = None, tuning_from: str | None = None, dataset_path: str | None = None,
                 cache_dir: str | None = None, force: bool = False) -> tuple[Any, Path]:
    """Run (or resume) the loop of ``config``; returns ``(final LoopState, run dir)``."""
    from memtrace_opt import run_dir as rd
    from memtrace_opt.assemble import build_context, prepare_run
    from memtrace_opt.loop import run_loop
    from memtrace_opt.run_lock import run_lock

    cfg, source, run_dir = prepare_run(config, out=out, dataset_path=dataset_path, cache_dir=cache_dir)
    if tuning_from is not None and not (Path(tuning_from) / "tuning.json").exists():
        raise ConfigError(tuning_from, None, "no tuning.json here: --tuning-from needs a run dir that tuned settings")
    with run_lock(run_dir, "optimize"):
        changed = rd.check_same_config(run_dir, cfg, source, "choose another --out for the changed config",
                                       force=force) if resume else []
        ctx, ledger = build_context(cfg, method=method, run_dir=run_dir, tuning_from=tuning_from, progress=stamped)
        if not resume or changed or not (run_dir / rd.CONFIG_FILE).exists():
            rd.write_config(run_dir, cfg)
        state = run_loop(ctx, resume=resume)
        if ledger is not None:
            rd.write_usage(run_dir, {"ledger": ledger.to_dict(), "loop": state.spend})
    return state, run_dir


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
    ) -> None:
        """Attribute failures, optimize the blamed prompts, compare seed vs optimized on held-out questions."""
        from memtrace_opt.commands.console import table_console

        state, run_dir = run_optimize(config, method=method, resume=resume, out=out, tuning_from=tuning_from,
                                      dataset_path=dataset_path, cache_dir=cache_dir, force=force)
        console = table_console()
        console.print(rounds_table(state))
        final = state.final or {}
        console.print(
            f"held-out ({final.get('n', 0)} questions): no optimization {100 * final.get('seed_accuracy', 0):.1f}% → "
            f"optimized {100 * final.get('best_accuracy', 0):.1f}% · changed: "
            f"{', '.join(final.get('changed_components') or []) or 'nothing'} · stop: {state.stop_reason}"
        )
        if final.get("n"):
            console.print(_effect_line(run_dir))
        spend = state.spend
        console.print(f"spent: {spend.get('rollouts', 0)} rollouts, {spend.get('llm_calls', 0)} LM calls "
                      f"({spend.get('cached_calls', 0)} cached), {spend.get('wall_s', 0):.0f} s")
        if attribute:
            _attribute_heldout(run_dir, console)
        console.print(f"run dir: {run_dir}")


def _effect_line(run_dir: Path) -> str:
    """The held-out effect of the optimized prompts: paired gain with its 95% CI and p, questions fixed and broken."""
    from memtrace_opt.loop.compare import compare_finals, load_final

    final = load_final(run_dir)
    row = compare_finals({str(run_dir): final})[0]
    cases = final.get("cases") or []
    fixed = sum(1 for c in cases if c["best_score"] > c["seed_score"])
    broke = sum(1 for c in cases if c["best_score"] < c["seed_score"])
    low, high = row.gain_ci
    return (f"effect: {100 * row.gain:+.1f} points, paired bootstrap 95% CI [{100 * low:+.1f}, {100 * high:+.1f}], "
            f"p = {row.p_value:.3f} · {fixed} questions fixed, {broke} broken")


def _attribute_heldout(run_dir: Path, console: Any) -> None:
    """Blame every held-out failure of the final prompts, so the run's report says why each one failed."""
    from memtrace_opt.commands.attribute import attribute_run

    # counterfactual and evidence as the run config's attribution section says
    payload = attribute_run(run_dir, progress=stamped)
    counts: dict[str, int] = {}
    for signal in payload["signals"]:
        counts[signal["error_type"] or "unattributed"] = counts.get(signal["error_type"] or "unattributed", 0) + 1
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no failures"
    console.print(f"held-out failures attributed: {summary} (blame.json)")
