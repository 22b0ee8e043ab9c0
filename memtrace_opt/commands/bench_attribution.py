"""``memtrace-opt bench-attribution CONFIG``: how well each attribution method finds the faulty op.

Runs each chosen memory system on the config's dataset slice, builds cases with ground truth (fault
injection into correct answers, unambiguous real failures, audit-flagged gold answers), runs every
method on the same cases with the same LM, and reports error-type and op-id accuracy with cost per
case: a JSON file (``{"rows": [...]}``, one row per method with per-system/type/source breakdowns)
and a table. The cases are exported as a MemTraceBench-style directory.

With the embedded 1.5B model on two cores every system run and every LLM method is slow (see
NOTES.md §5): size ``--max-cases`` and the dataset slice accordingly, or point ``models`` at a server.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, Sequence

import typer

from memtrace_opt.errors import ConfigError

__all__ = ["register", "run_bench", "SYSTEMS"]

SYSTEMS = ("rag", "mem0", "evermemos", "long_context")
ALL_METHODS = ("tracing", "tracing+llm", "tracing+cf", "flat_log", "all_at_once", "step_by_step", "binary_search")


def _split(value: str | None, allowed: tuple[str, ...], option: str) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise ConfigError(option, None, f"unknown value {bad[0] if bad else value!r}; choose from {', '.join(allowed)}")
    return items


def _methods(names: list[str], lms: dict[str, Any], evidence: str, embed: Any,
             max_replay_calls: int | None = None) -> dict[str, Any]:
    from memtrace_opt.attribution.counterfactual import CounterfactualAttributor
    from memtrace_opt.attribution.methods import make_attribution_method as make_method

    out: dict[str, Any] = {}
    for name in names:
        if name == "tracing+cf":
            tracing = make_method("tracing", lms, evidence=evidence, embed=embed)
            out[name] = CounterfactualAttributor(tracing, rerun=lambda tracer: None, lms=lms,
                                                 max_replay_calls=max_replay_calls)
        elif name == "tracing+llm":
            out[name] = make_method("tracing", lms, evidence=evidence, embed=embed, llm_content=True)
        else:
            out[name] = make_method(name, lms, evidence=evidence, embed=embed)
    return out


def _settings(cfg: Any, system: str) -> dict[str, Any]:
    """The config's settings for its own system; only ``top_k`` carries over to the others."""
    if system == cfg.system.name:
        return dict(cfg.system.settings)
    top_k = cfg.system.settings.get("top_k")
    return {"top_k": top_k} if top_k is not None else {}


def run_bench(config: str | Sequence[str], *, systems: list[str] | None = None, methods: list[str] | None = None,
              max_cases: int = 100, max_real: int = 50, real: bool = True, evidence: str = "annotated",
              out: str | None = None, export: str | None = None, embed: Any = "default",
              focus: bool = True, max_replay_calls: int | None = None, suite: str = "easy",
              progress: Callable[[str], None] | None = None, injected: Any = None) -> dict[str, Any]:
    """Build the cases, run the methods, write the JSON and the benchmark directory; returns the payload.

    Several configs pool their cases (a small dataset alone offers too few correct answers to inject
    into): the first config gives the models, cache, run directory and systems' settings; every
    config gives its dataset slice and judge. ``focus`` replays each injection on ingestion plus the
    case's own question (False: the whole conversation, every question re-answered).
    ``max_replay_calls`` caps the LM calls of each injection and counterfactual replay (a Mem0
    ingestion fault re-decides every later memory update); a capped injection is a counted skip.
    ``suite``: ``easy`` (evidence dropped, one case per error type) or ``hard`` (the subtler classes
    of :mod:`memtrace_opt.attribution.inject_hard`, reported per class in ``by_class``). ``progress`` gets
    progress lines (None: silent); ``injected`` replaces the configured models.
    """
    say = progress or _silent
    from memtrace_opt.attribution.bench import bench_payload, evidence_recall, export_bench, run_methods
    from memtrace_opt.attribution.evidence import default_embed
    from memtrace_opt.attribution.benchcases import CaseBuilder
    from memtrace_opt.attribution.inject_hard import HARD_KINDS
    from memtrace_opt.attribution.methods import pick_embed
    from memtrace_opt.run.attributing import build_lms
    from memtrace_opt.config import load_config

    configs = [config] if isinstance(config, str) else list(config)
    cfgs = [load_config(c) for c in configs]
    cfg = cfgs[0]
    systems = systems or [cfg.system.name]
    run_dir = cfg.run_dir
    lms, resources = build_lms(cfg, run_dir, injected)
    per_system = 5 if suite == "easy" else len(HARD_KINDS)
    builder = CaseBuilder(per_type=max(1, math.ceil(max_cases / (len(systems) * per_system))),
                          max_real=max_real if real else 0, max_replay_calls=max_replay_calls, suite=suite)
    for slice_cfg in cfgs:
        _add_slice(builder, slice_cfg, cfg, systems, lms, resources, real=real, focus=focus, say=say)
    embed_fn = pick_embed(embed, resources)
    chosen = _methods(methods or list(ALL_METHODS), lms, evidence, embed_fn, max_replay_calls)
    say(f"{len(builder.cases)} cases; running {', '.join(chosen)}")
    results = run_methods(builder.cases, chosen, lms=lms,
                          progress=lambda name, i: say(f"{name}: {i}/{len(builder.cases)} cases"))
    payload = bench_payload(results, skipped=builder.skipped_summary())
    payload["pseudo_evidence_recall"] = evidence_recall(builder.cases, default_embed if embed_fn == "default" else embed_fn)
    payload["config"] = {"systems": systems, "max_cases": max_cases, "evidence": evidence,
                         "focused_replay": focus, "max_replay_calls": max_replay_calls, "suite": suite,
                         "datasets": [_slice_label(c) for c in cfgs], "judges": [c.eval.judge for c in cfgs]}
    export_dir = Path(export) if export else run_dir / "attribution_bench"
    payload["exported"] = [str(p) for p in export_bench(builder.cases, export_dir)]
    from memtrace_opt import rundir as rd

    payload["out"] = str(Path(out) if out else run_dir / "attribution_bench.json")
    rd.write_json(Path(payload["out"]), payload)
    return payload


def _add_slice(builder: Any, slice_cfg: Any, main_cfg: Any, systems: list[str], lms: dict[str, Any],
               resources: dict[str, Any], *, real: bool, focus: bool, say: Callable[[str], None]) -> None:
    """Run every system on one config's conversations and add their cases (until the quotas are met)."""
    from memtrace_opt.run.assemble import load_conversations
    from memtrace_opt.systems.runner import make_rerun, run_conversation

    conversations = list(load_conversations(slice_cfg).values())
    judge = slice_cfg.eval.judge
    for system in systems:
        settings = _settings(main_cfg, system)
        prompts = dict(main_cfg.system.prompts) if system == main_cfg.system.name else None
        for conv in conversations:
            if builder.full([system]):
                break
            qas = list(conv.scored_qa())
            say(f"running {system} on {conv.id}")
            run = run_conversation(system, conv, qas, lms=lms, prompts=prompts, settings=settings, judge=judge,
                                   resources=resources)

            def rerun_for(subset: Sequence[Any], system: str = system, conv: Any = conv,
                          settings: dict[str, Any] = settings) -> Any:
                return make_rerun(system, conv, subset, settings, judge, resources=resources)

            builder.add_run(run.graph, qas, rerun_for(qas), lms, system=system, real=real,
                            focus=rerun_for if focus else None)


def _silent(message: str) -> None:
    """The progress callback of a quiet run."""


def _slice_label(cfg: Any) -> str:
    """``dataset[conversations, sessions]``: what one config contributed, for the JSON."""
    d = cfg.dataset
    parts = [",".join(d.conversations) if d.conversations else "all"]
    if d.max_sessions:
        parts.append(f"{d.max_sessions} sessions")
    return f"{d.name}[{'; '.join(parts)}]"


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
        from memtrace_opt.commands.console import Reporter

        if evidence not in ("annotated", "pseudo"):
            raise ConfigError("--evidence", None, f"expected annotated or pseudo, got {evidence!r}")
        if suite not in ("easy", "hard"):
            raise ConfigError("--suite", None, f"expected easy or hard, got {suite!r}")
        report = Reporter(quiet=quiet, as_json=as_json)
        payload = run_bench(config, systems=_split(systems, SYSTEMS, "--systems"),
                            methods=_split(methods, ALL_METHODS, "--methods"), max_cases=max_cases,
                            max_real=max_real, evidence=evidence, out=out, export=export, focus=not full_replay,
                            max_replay_calls=max_replay_calls, suite=suite, progress=report.progress,
                            injected=ctx.obj)
        report.result(payload, bench_table(payload))
        recall = payload["pseudo_evidence_recall"]
        if recall["n"]:
            report.note(f"pseudo-evidence recall@{recall['k']}: {recall['mean']:.3f} over {recall['n']} cases")
        for key, reasons in payload["skipped"].items():
            report.note(f"skipped {key}: " + "; ".join(f"{why} ×{n}" for why, n in reasons.items()))
        report.summary(f"bench-attribution: {payload['cases']} cases, {len(payload['rows'])} methods · "
                       f"wrote {payload['out']}")
