"""``memtrace-opt bench-lm``: LM throughput of a memory system on the embedded model, measured.

Parses the options, runs :func:`memtrace_opt.bench.lm_run.run_bench_lm` (one run per speculative mode
or settings variant, then scoped vs full replay of a changed ingestion prompt) and prints the
figures per mode and op kind (``--json``: one object, the shape ``experiments/results/bench_lm*.json``
keeps). Minutes on two cores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``bench-lm`` to the CLI."""

    @app.command("bench-lm")
    def bench_lm(
        system: Annotated[str, typer.Option(help="Memory system to run.")] = "mem0",
        modes: Annotated[str, typer.Option(help="Speculative modes, comma-separated; the first is the baseline.")]
        = "none,ngram_mod",
        sessions: Annotated[int, typer.Option(min=1, help="Sessions of the conversation to ingest.")] = 1,
        questions: Annotated[int, typer.Option(min=1, help="Questions scored (the replay minibatch).")] = 3,
        dataset: Annotated[Optional[Path], typer.Option(help="A LoCoMo-format file (default: the bundled mini set).")]
        = None,
        conversation: Annotated[Optional[str], typer.Option(help="Conversation id (default: the first).")] = None,
        threads: Annotated[Optional[int], typer.Option(min=1, help="Model threads (default: all cores).")] = None,
        changed_prompt: Annotated[Optional[str], typer.Option(
            help="Prompt the scored candidate changes, not the answer prompt (default: the system's first).")] = None,
        variant: Annotated[Optional[list[str]], typer.Option(
            help="A settings run, 'LABEL: key=value, ...' (repeat it; the first is the baseline; each uses the "
                 "first mode), e.g. 'session: turns_per_add=session'.")] = None,
        judge: Annotated[str, typer.Option(help="Judge of the accuracy column: deterministic, hybrid or llm "
                                                "(the LLM judge is the same embedded model).")] = "deterministic",
        scoped: Annotated[bool, typer.Option("--scoped-replay/--no-scoped-replay",
                                             help="Also measure scoped vs full replay.")] = True,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", help="No progress lines.")] = False,
    ) -> None:
        """Measure speculative decoding and scoped replay on the embedded model (minutes on 2 cores)."""
        from memtrace_opt.bench.lm_run import run_bench_lm
        from memtrace_opt.commands.console import Reporter

        report = Reporter(quiet=quiet, as_json=as_json)
        result = run_bench_lm(system=system, modes=tuple(m.strip() for m in modes.split(",") if m.strip()),
                              sessions=sessions, questions=questions, dataset=dataset, conversation=conversation,
                              threads=threads, changed_prompt=changed_prompt, variants=tuple(variant or ()),
                              judge=judge, scoped_replay=scoped, progress=report.progress)
        report.result(result, *_lines(result))
        first: dict[str, Any] = next(iter(result["speculation"]["modes"].values()), {})
        report.summary(f"bench-lm: {system}, {len(result['speculation']['modes'])} run(s), baseline "
                       f"{first.get('seconds_per_turn', '?')} s/turn")


def _lines(result: dict[str, Any]) -> list[str]:
    """The human-readable result: per mode and op kind, then scoped vs full replay."""
    lines = []
    for mode, row in result["speculation"]["modes"].items():
        lines.append(f"{mode}: {row['seconds_per_turn']} s/turn (x{row['speedup_per_turn']}), "
                     f"{row.get('question_lm_s_per_question')} s/question, accuracy {row.get('accuracy')}, "
                     f"{row.get('extracted_per_turn')} extracted/turn, identical outputs: {row['identical_outputs']}")
        split = row.get("prefill_decode")
        if split:
            lines.append(f"  prefill {split['prefill_tok_s']} tok/s, decoding {split['decode_tok_s']} tok/s "
                         f"(x{split['prefill_to_decode_speed']}); decoding is {split.get('decode_share')} of LM time, "
                         f"so making it free would be x{split.get('decode_free_bound')} at most")
        for name, stats in row["ops"].items():
            lines.append(f"  {name}: {stats['calls']} calls, {stats['lm_s']} s, {stats['tok_s_overall']} tok/s, "
                         f"x{stats['speedup']}" + (f", prefill {stats['prefill_s']} s / decoding {stats['decode_s']} s"
                                                  if "decode_s" in stats else ""))
    scoped = result.get("scoped_replay")
    if scoped:
        lines.append(f"scoped replay: {scoped['scoped']['lm_calls']} vs {scoped['full']['lm_calls']} LM calls "
                     f"(ratio {scoped['ratio_lm_calls']}), {scoped['scoped']['seconds']} vs "
                     f"{scoped['full']['seconds']} s, same answers: {scoped['same_answers']}")
    return lines
