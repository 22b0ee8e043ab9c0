"""One card per failed question: what was asked, what went wrong, where, and the graph that shows it.

Graphs are loaded one conversation at a time and only the first ``max_graphs`` cards get a drawing
(each is a capped slice, never the whole graph); every card sits in a closed ``<details>`` except
the first few, so a run with hundreds of failures still opens instantly.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.errors import GraphError
from memtrace_opt.graph.io_json import load_json
from memtrace_opt.graph.model import MemoryGraph
from memtrace_opt.report.collect import FailedQuestion, RunData
from memtrace_opt.report.escape import clip, esc
from memtrace_opt.report.fmt import count, duration, num
from memtrace_opt.report.graph_svg import error_tag, slice_svg, timeline_svg
from memtrace_opt.report.layout import column_of, layout_question
from memtrace_opt.report.slices import SliceIndex
from memtrace_opt.report.theme import ERROR_HELP, error_color, error_order

__all__ = ["QuestionOptions", "failed_section", "question_card"]

OPEN_FIRST = 3


@dataclass(frozen=True)
class QuestionOptions:
    """How much to draw: graphs for the first ``max_graphs`` failures, ``max_nodes`` nodes per slice."""

    max_graphs: int = 100
    max_nodes: int = 34


class _Graphs:
    """Loads each conversation's graph once, keeping only the current one with its slice index.

    A graph that cannot be loaded becomes a note (its cards say so) rather than failing the report.
    """

    def __init__(self, data: RunData, drawn: list[FailedQuestion]) -> None:
        self.data = data
        self.qa_ids: dict[Path | None, list[str]] = {}
        for f in drawn:
            self.qa_ids.setdefault(data.graph_file(f.conversation), []).append(f.qa_id)
        self.current: tuple[Path | None, MemoryGraph | None, SliceIndex | None, str | None] = (None, None, None, None)

    def get(self, conversation: str | None) -> tuple[MemoryGraph | None, SliceIndex | None, str | None]:
        path = self.data.graph_file(conversation)
        if path is None:
            return None, None, "no graph file for this conversation in the run directory"
        if self.current[0] != path:
            try:
                g = load_json(path)
                self.current = (path, g, SliceIndex(g, self.qa_ids.get(path, []), column_of), None)
            except GraphError as err:
                self.current = (path, None, None, f"graph could not be read: {err.one_line()}")
                self.data.notes.append(self.current[3])
        return self.current[1], self.current[2], self.current[3]


def failed_section(data: RunData, options: QuestionOptions = QuestionOptions()) -> str:
    """The failed questions: legend, filters, and a card each (in the order the run answered them)."""
    if not data.failed:
        return ""
    graphs = _Graphs(data, data.failed[: options.max_graphs])
    order = sorted(range(len(data.failed)), key=lambda i: (data.failed[i].conversation or "", i))
    cards: dict[int, str] = {}
    for i in order:
        draw = i < options.max_graphs
        cards[i] = question_card(data.failed[i], graphs.get if draw else None, options, open_=i < OPEN_FIRST)
    skipped = max(0, len(data.failed) - options.max_graphs)
    note = (f" Graphs are drawn for the first {options.max_graphs}; {skipped} more are listed without one."
            if skipped else "")
    controls = ("<input type='search' id='q-search' placeholder='search questions…' aria-label='search questions'>"
                "<button type='button' id='expand-all'>expand all</button>"
                "<button type='button' id='collapse-all'>collapse all</button><span id='q-count' class='muted'></span>")
    return (f'<section id="failures"><h2>Failed questions ({len(data.failed)})</h2><p class="lead">Each card shows '
            f"the question's slice of the memory evolution graph, read left to right as memory flows. The blamed "
            f"operation is outlined in red; the darker edges trace the evidence toward the answer.{esc(note)}</p>"
            f"{graph_legend()}<div class='filters'>{_filter_chips(data.failed)}{controls}</div>"
            f"{''.join(cards[i] for i in range(len(data.failed)))}</section>")


def _filter_chips(failed: list[FailedQuestion]) -> str:
    """One toggle per error type present (with its count), plus one for failures without blame."""
    counts = Counter(f.blame.error_type if f.blame is not None else None for f in failed)
    chips = [(t, t, counts[t]) for t in error_order(t for t in counts if t is not None)]
    if counts[None]:
        chips.append(("unattributed", "not attributed", counts[None]))
    return "".join(
        f'<button type="button" data-filter="{esc(key)}" aria-pressed="true" '
        f'style="--c:{error_color(None if key == "unattributed" else key)}"><span class="sw"></span>{esc(label)} '
        f"<b>{n}</b></button>" for key, label, n in chips)


_SWATCH = "<svg width='26' height='14'>{}</svg>"
_LEGEND = (
    ("<rect x='1' y='1' width='24' height='12' rx='4' class='lg-var'/>",
     "value (message, memory unit, context, answer)"),
    ("<ellipse cx='13' cy='7' rx='12' ry='6' class='lg-op'/>", "LLM step (uses a prompt)"),
    ("<polygon points='13,1 25,7 13,13 1,7' class='lg-op'/>", "code step (no prompt)"),
    ("<rect x='2' y='2' width='22' height='10' rx='4' class='lg-blamed'/>", "blamed operation"),
    ("<rect x='2' y='2' width='22' height='10' rx='4' class='lg-evidence'/>", "evidence message"),
    ("<rect x='2' y='2' width='22' height='10' rx='4' class='lg-failed'/>", "op failed (unusable LLM reply)"),
    ("<path d='M1 7 H25' class='lg-version'/>", "reads previous version (update)"),
)


def graph_legend() -> str:
    """Shapes and outlines of the graph drawings, explained once."""
    items = "".join(f"<span>{_SWATCH.format(shape)} {esc(text)}</span>" for shape, text in _LEGEND)
    return f"<div class='legend graph-legend'>{items}</div>"


GetGraph = Callable[[str | None], tuple[MemoryGraph | None, SliceIndex | None, str | None]]


def question_card(f: FailedQuestion, get_graph: GetGraph | None,
                  options: QuestionOptions = QuestionOptions(), *, open_: bool = False) -> str:
    """One failed question as a ``<details>`` card; ``get_graph`` None means listed without a drawing."""
    b = f.blame
    etype = b.error_type if b is not None else None
    search = f"{f.qa_id} {f.question} {f.prediction} {f.gold}".lower()
    head = (f"<summary>{error_tag(etype)}<span class='qid'>{esc(f.qa_id)}</span><span class='qtext'>"
            f"{esc(clip(f.question, 140))}</span><span class='ans'>said “{esc(clip(f.prediction, 60))}” · gold "
            f"“{esc(clip(f.gold, 60))}”</span></summary>")
    body = [_why(f, b), _facts(f)]
    if get_graph is not None:
        body.append(_drawing(f, b, get_graph, options))
    attrs = f' data-error="{esc(etype or "unattributed")}" data-text="{esc(search)}" style="--c:{error_color(etype)}"'
    opened = " open" if open_ else ""
    return f"<details class='q'{attrs}{opened}>{head}<div class='qbody'>{''.join(body)}</div></details>"


def _why(f: FailedQuestion, b: BlameSignal | None) -> str:
    if b is None:
        return ("<div class='reason none'>Not attributed: run <code>memtrace-opt attribute</code> to find the "
                "faulty operation.</div>")
    if b.sent_to_every_prompt:
        target = "<b>every prompt</b>: the unattributed ablation's label (no operation was blamed)"
    elif b.prompt_component:
        target = f"prompt <code>{esc(b.prompt_component)}</code>"
    else:
        target = "no prompt: <b>not optimizable</b> by prompt rewriting"
    if b.counterfactual_rescued is True:
        cf = "<span class='cf yes'>✓ counterfactual: correcting this op rescues the answer</span>"
    elif b.counterfactual_rescued is False:
        cf = "<span class='cf no'>✗ counterfactual: correcting this op alone did not rescue the answer</span>"
    elif b.cost.replays:  # replayed (the arbiter), but the blame names no single-op fix whose rescue could be tested
        cf = f"<span class='cf na'>counterfactual: {b.cost.replays} replay(s), no single-op fix to test</span>"
    else:
        cf = "<span class='cf na'>counterfactual not checked</span>"
    help_ = ERROR_HELP.get(b.error_type or "", "")
    return (f"<div class='reason' style='--c:{error_color(b.error_type)}'><div class='rtitle'>"
            f"{error_tag(b.error_type)} <span class='muted'>{esc(help_)}</span></div><p>{esc(b.reason)}</p>"
            f"{_chain(b)}"
            f"<div class='rmeta'>{'labelled' if b.sent_to_every_prompt else 'blamed'} op <code>{esc(b.op_id or '—')}</code> · {target} · {cf}<br>"
            f"<span class='muted'>method {esc(b.method)} · confidence {num(b.confidence, 2)} · "
            f"{count(b.cost.llm_calls)} LLM calls · {duration(b.cost.seconds)} · {count(b.cost.replays)} replays"
            f"</span></div></div>")


def _chain(b: BlameSignal) -> str:
    """A compound failure's later faults: what is still wrong once the blamed op is corrected."""
    if not b.chain:
        return ""
    outcome = {True: "correcting it too rescues the answer", False: "still wrong with it corrected too",
               None: "no fix short of the gold answer"}
    items = "".join(f"<li>{error_tag(link.error_type)} <code>{esc(link.op_id or '—')}</code> · "
                    + (f"prompt <code>{esc(link.prompt_component)}</code>" if link.prompt_component else "no prompt")
                    + f" · {esc(outcome[link.rescued])}<br><span class='muted'>{esc(link.reason)}</span></li>"
                    for link in b.chain)
    return f"<div class='chain'>Compound failure, then at fault once this op is corrected:<ol>{items}</ol></div>"


def _facts(f: FailedQuestion) -> str:
    rows = [("question", f.question), ("gold answer", f.gold), ("system answered", f.prediction)]
    if f.judge_label or f.judge_reason:
        rows.append(("judge", f"{f.judge_label} {('— ' + f.judge_reason) if f.judge_reason else ''}".strip()))
    if f.category:
        rows.append(("category", f.category))
    if f.blame is not None and f.blame.evidence:
        rows.append(("evidence", ", ".join(f.blame.evidence)))
    if f.conversation:
        rows.append(("conversation", f.conversation))
    return "<dl class='facts'>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows) + "</dl>"


def _drawing(f: FailedQuestion, b: BlameSignal | None, get_graph: GetGraph, options: QuestionOptions) -> str:
    g, index, problem = get_graph(f.conversation)
    if g is None:
        return f"<p class='note'>{esc(problem or 'graph unavailable')}</p>"
    try:
        lay = layout_question(g, f.qa_id, blamed_op=b.op_id if b else None, evidence=b.evidence if b else (),
                              max_nodes=options.max_nodes, index=index)
    except GraphError as err:
        return f"<p class='note'>{esc(err.one_line())}</p>"
    missing = ""
    if b is not None and b.op_id and b.op_id not in g.ops:
        missing = f" The blamed op {b.op_id} is not in this graph."
    rest = " (“+N more” nodes stand for the rest)" if lay.shown < lay.total else ""
    caption = (f"{lay.shown} of {lay.total} nodes drawn{rest}"
               f"; hover a node for its full value and to trace its edges.{missing}")
    lives = "".join(f"<div class='unit-life'><div class='ul-title'>Life of memory unit <code>{esc(name)}</code></div>"
                    f"{timeline_svg(g, name, blamed_op=lay.blamed_op)}</div>" for name in lay.units)
    return (f"<div class='graphwrap'>{slice_svg(lay, error_type=b.error_type if b else None)}</div>"
            f"<p class='caption'>{esc(caption)}</p>" + (f"<div class='lives'>{lives}</div>" if lives else ""))
