"""``memtrace-opt trace show``: read a run's memory graphs as a person would, one question at a time.

A run directory holds one graph per conversation, either as ``graphs/<conversation id>.jsonl.gz``
(or ``.jsonl``; see :mod:`memtrace_opt.graph.io_json`) or as ``graphs.sqlite`` keyed by conversation
id. Without ``--question`` the command lists the questions with their answers and judgements; with it,
it prints the question's slice session by session: each op with its category, prompt component and
status, the variables it read and wrote (messages, memory units with their versions, the retrieved
context, the answer, the judgement) and a short preview of each value.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Iterator, Optional

import typer

from memtrace_opt.errors import GraphError

if TYPE_CHECKING:
    from memtrace_opt.graph import MemoryGraph, Operation

_SUFFIXES = (".jsonl.gz", ".jsonl")
_WIDTH = 90


class RunGraphs:
    """The conversation graphs of one run directory, loaded on demand."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise GraphError(f"{self.run_dir}: no such run directory")
        self.files = {_conversation_id(p): p for p in sorted((self.run_dir / "graphs").glob("*.jsonl*"))
                      if p.name.endswith(_SUFFIXES)}
        self.db = self.run_dir / "graphs.sqlite"
        if not self.files and not self.db.is_file():
            raise GraphError(f"{self.run_dir}: no graphs/<conversation>.jsonl.gz files and no graphs.sqlite")

    def conversations(self) -> list[str]:
        from memtrace_opt.graph.io_sqlite import list_graphs

        ids = set(self.files)
        if self.db.is_file():
            ids |= set(list_graphs(self.db))
        return sorted(ids)

    def load(self, conversation: str) -> MemoryGraph:
        from memtrace_opt.graph.io_json import load_json
        from memtrace_opt.graph.io_sqlite import list_graphs, load_graph

        if conversation in self.files:
            return load_json(self.files[conversation])
        if self.db.is_file() and conversation in list_graphs(self.db):
            return load_graph(self.db, conversation)
        raise GraphError(f"{self.run_dir}: no graph for conversation {conversation!r} "
                         f"(have: {', '.join(self.conversations())})")

    def graphs(self, conversation: str | None = None) -> Iterator[tuple[str, MemoryGraph]]:
        for conv in [conversation] if conversation else self.conversations():
            yield conv, self.load(conv)


def _conversation_id(path: Path) -> str:
    name = path.name
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


# -- rendering ------------------------------------------------------------------------------------
def question_ids(g: MemoryGraph) -> list[str]:
    """The ids of the questions answered in ``g`` (from its ``answer:<qa id>`` variables), in order."""
    return [name.removeprefix("answer:") for name in g.latest if name.startswith("answer:")]


def _value(g: MemoryGraph, name: str, width: int = _WIDTH) -> str | None:
    from memtrace_opt.graph.queries import short_value

    return short_value(g.value(g.latest_id(name)), width) if name in g.latest else None


def render_questions(conversation: str, g: MemoryGraph) -> list[str]:
    """One line per question: id, answer and judgement previews."""
    lines = [f"{conversation}: {len(g.ops)} ops, {sum(o.status != 'ok' for o in g.ops.values())} failed, "
             f"{len(question_ids(g))} questions"]
    for qa in question_ids(g):
        verdict = _value(g, f"judgement:{qa}", 40)
        lines.append(f"  {qa}  answer={_value(g, f'answer:{qa}', 50)}" + (f"  judgement={verdict}" if verdict else ""))
    return lines


def render_slice(g: MemoryGraph, qa_id: str, conversation: str = "") -> list[str]:
    """The question's slice as text: a header (question, gold, answer, judgement), then ops by session."""
    from memtrace_opt.graph.queries import question_slice

    s = question_slice(g, qa_id)
    lines = [f"question {qa_id}" + (f" ({conversation})" if conversation else "")]
    for label, name in (("question", "question"), ("gold", "gold"), ("answer", "answer"), ("judgement", "judgement")):
        shown = _value(s, f"{name}:{qa_id}")
        if shown is not None:
            lines.append(f"  {label:<9} {shown}")
    failed = [o.id for o in s.ops.values() if o.status != "ok"]
    lines.append(f"  slice: {len(s.variables)} variables, {len(s.ops)} ops"
                 + (f", {len(failed)} FAILED: {', '.join(failed)}" if failed else ""))
    by_session: dict[str | None, list[Operation]] = {}
    for op in sorted(s.ops.values(), key=lambda o: o.time):
        by_session.setdefault(op.session, []).append(op)
    for session, ops in by_session.items():
        rec = s.sessions.get(session) if session else None
        extra = "".join(f", {k}={v}" for k, v in (rec.meta.items() if rec else ()) if k != "qa_id")
        lines.append("")
        lines.append(f"{session or '(no session)'}" + (f"  [{rec.kind}{extra}]" if rec else ""))
        for op in ops:
            lines += _render_op(s, op)
    return lines


def _render_op(g: MemoryGraph, op: Operation) -> list[str]:
    from memtrace_opt.graph.queries import short_value

    prompt = f" · prompt {op.prompt.component}" if op.prompt else ""
    reused = " · reused" if op.reused else ""
    lines = [f"  ● {op.id}  [{op.category}{prompt}{reused}]"]
    if op.status != "ok":
        lines.append(f"    ✗ FAILED: {op.error or op.status}")
        if op.raw:
            lines.append(f"      raw reply: {short_value(op.raw, _WIDTH)}")
    shown_inputs: set[str] = set()
    for role, ids in sorted(op.inputs.items(), key=lambda item: item[0] == "_previous"):
        for vid in ids:
            if role == "_previous" and vid in shown_inputs:
                continue  # the version an update replaces, already listed under its own role
            shown_inputs.add(vid)
            lines.append(f"    ← {role:<10} {vid:<28} {short_value(g.value(vid), _WIDTH - 30)}")
    for role, vid in op.outputs.items():
        var = g.variables[vid]
        shown = "(deleted)" if var.deleted else short_value(var.value, _WIDTH - 30)
        lines.append(f"    → {role:<10} {vid:<28} {shown}")
    return lines


def show(run_dir: str, question: str | None, conversation: str | None) -> list[str]:
    """What ``trace show`` prints, as lines (raises :class:`GraphError` on a missing run or question)."""
    run = RunGraphs(run_dir)
    if question is None:
        return [line for conv, g in run.graphs(conversation) for line in render_questions(conv, g)]
    for conv, g in run.graphs(conversation):
        if f"answer:{question}" in g.latest:
            return render_slice(g, question, conv)
    where = f"conversation {conversation!r}" if conversation else f"any conversation of {run_dir}"
    raise GraphError(f"question {question!r} is not answered in {where}")


def register(app: typer.Typer) -> None:
    """Add the ``trace`` command group to the CLI."""
    trace_app = typer.Typer(help="Inspect a run's memory evolution graphs.", no_args_is_help=True)

    @trace_app.callback()
    def _group() -> None:
        """Inspect a run's memory evolution graphs."""

    @trace_app.command("show")
    def show_cmd(
        run_dir: Annotated[str, typer.Argument(help="Run directory (graphs/<conversation>.jsonl.gz or graphs.sqlite).")],
        question: Annotated[Optional[str], typer.Option("--question", "-q", help="QA id to show the slice of.")] = None,
        conversation: Annotated[Optional[str], typer.Option("--conversation", "-c", help="Only this conversation.")] = None,
    ) -> None:
        """List a run's questions, or print one question's slice: messages, ops, memory versions, answer."""
        for line in show(run_dir, question, conversation):
            typer.echo(line)

    app.add_typer(trace_app, name="trace")
