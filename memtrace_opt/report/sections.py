"""The report's aggregate sections: where errors come from, and what the optimizer changed."""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.graph.model import op_name
from memtrace_opt.loop.artifacts import prompt_diff
from memtrace_opt.loop.budget import spend_line
from memtrace_opt.loop.compare import heldout_effect
from memtrace_opt.report.charts import line_chart, stacked_bars
from memtrace_opt.report.collect import RunData
from memtrace_opt.report.diff import diff_html, diff_stats
from memtrace_opt.report.escape import esc
from memtrace_opt.report.fmt import pct
from memtrace_opt.report.theme import ATTRIBUTION_FAILED, ERROR_HELP, error_color, error_order

__all__ = ["errors_section", "error_legend", "notes_section", "optimization_section", "op_name"]


def error_legend(types: Iterable[str]) -> str:
    """Colour chips for ``types`` with a one-line meaning each."""
    return "<div class='legend'>" + "".join(
        f"<span style='--c:{error_color(t)}'><span class='sw'></span><b>{esc(t)}</b> "
        f"{esc(ERROR_HELP.get(t, ''))}</span>"
        for t in types) + "</div>"


def _error_type(s: BlameSignal) -> str:
    """A signal's error type as the report counts it: collect_run already labels a failed attribution (no
    error type) ATTRIBUTION_FAILED, so this is ``s.error_type`` for every signal of a collected run."""
    return s.error_type or ATTRIBUTION_FAILED


def _rows(signals: list[BlameSignal], key: Callable[[BlameSignal], str]) -> list[tuple[str, Counter[str]]]:
    groups: dict[str, Counter[str]] = {}
    for s in signals:
        groups.setdefault(key(s), Counter())[_error_type(s)] += 1
    return sorted(groups.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))


def _component_label(s: BlameSignal) -> str:
    """The prompt-component bar a signal counts in: an unattributed label reaches every prompt, not none."""
    if s.sent_to_every_prompt:
        return "every prompt (unattributed)"
    return s.prompt_component or "no prompt (unoptimizable)"


def errors_section(data: RunData) -> str:
    """Error-type distribution per system, per operation, per prompt component and per optimization round."""
    from_rounds = not data.blame
    signals = data.blame or [s for k in sorted(data.round_blame) for s in data.round_blame[k]]
    if not signals:
        return ""
    order = error_order(_error_type(s) for s in signals)
    system = data.system or "this run"
    charts = [("per system", _rows(signals, lambda s: system)),
              ("per blamed operation", _rows(signals, lambda s: op_name(s.op_id))),
              ("per prompt component", _rows(signals, _component_label))]
    if data.round_blame:
        per_round = [(f"round {k}", Counter(_error_type(s) for s in signals_k))
                     for k, signals_k in sorted(data.round_blame.items())]
        charts.append(("per optimization round (training failures)", per_round))
    optimizable = sum(s.optimizable for s in signals)
    labels = sum(s.sent_to_every_prompt for s in signals)
    routed = (f"{labels} are the unattributed ablation's labels (no op blamed; sent to every prompt)"
              + (f", {optimizable} blame an op with a prompt the optimizer can rewrite" if optimizable else "")
              if labels else f"{optimizable} blame an op with a prompt the optimizer can rewrite")
    rescued = [s.counterfactual_rescued for s in signals if s.counterfactual_rescued is not None]
    cf = (f" Counterfactual replay confirmed {sum(rescued)} of {len(rescued)} checked blames." if rescued else "")
    where = " during the optimization rounds" if from_rounds else ""
    blocks = "".join(f"<div class='card chart-card'><h3>{esc(title)}</h3>{stacked_bars(rows, order)}</div>"
                     for title, rows in charts)
    return (f"<section id='errors'><h2>Where the errors come from</h2><p class='lead'>{len(signals)} failed questions "
            f"attributed{esc(where)}; {esc(routed)}.{esc(cf)}</p>"
            f"{error_legend(order)}<div class='grid2'>{blocks}</div></section>")


def optimization_section(data: RunData) -> str:
    """Accuracy per round per method, and each rewritten prompt as a diff against its seed."""
    if not data.rounds and not data.prompts and not data.final:
        return ""
    parts = ["<section id='optimization'><h2>Optimization</h2>", _final_line(data)]
    if data.rounds:
        parts.append("<p class='lead'>Validation accuracy of each round's prompts (round 0: the seed prompts); "
                     "whiskers are 95% CIs where recorded.</p>")
        parts.append(f"<div class='card chart-card'>{line_chart(data.rounds)}{_round_table(data)}</div>")
    if data.prompts:
        parts.append("<h3>What the optimizer changed</h3><p class='lead'>Each rewritten prompt against its seed: "
                     "<span class='dl-del'>removed</span> and <span class='dl-add'>added</span> lines, changed words "
                     "marked.</p>")
        for change in data.prompts:
            added, removed = diff_stats(change.diff)
            if change.diff:
                body = diff_html(change.diff)
            else:
                body = (f"<p class='note'>No seed text found; the new prompt in full:</p>"
                        f"<pre class='prompt'>{esc(change.new)}</pre>")
            parts.append(f"<details class='card prompt-change' open><summary><code>{esc(change.component)}</code> "
                         f"<span class='plus'>+{added}</span> <span class='minus'>−{removed}</span> lines</summary>"
                         f"{body}</details>")
    parts.append(_audit_block(data))
    if data.round_prompts:
        rounds = "".join(
            f"<details class='round-prompts'><summary>round {k}: "
            f"{esc(', '.join(c.component for c in changes))}</summary>"
            + "".join(f"<h4><code>{esc(c.component)}</code></h4>{diff_html(c.diff)}" for c in changes) + "</details>"
            for k, changes in sorted(data.round_prompts.items()))
        parts.append("<details class='card'><summary>Candidate of each round, against the seed</summary>"
                     f"{rounds}</details>")
    parts.append("</section>")
    return "".join(parts)


def _audit_block(data: RunData) -> str:
    """The candidates validation rejected, scored on held-out after the fact (final.json ``audit``):
    whether validation judged them right. Labelled as a check, since picking by it would overfit."""
    audit = data.final.get("audit") or []
    if not audit:
        return ""
    seed = data.checkpoint.get("seed_candidate") or {}
    rows, diffs = [], []
    for i, e in enumerate(audit, start=1):
        low, high = e.get("gain_ci") or (0.0, 0.0)
        gain = 100 * float(e.get("gain", 0.0))
        rows.append(f"<tr><td class='n'>{i}</td><td class='n'>{esc(e.get('round'))}</td><td>{esc(e.get('change'))}</td>"
                    f"<td class='n'>{pct(e.get('val_score'))}</td><td class='n'>{pct(e.get('accuracy'))}</td>"
                    f"<td class='n {'pos' if gain > 0 else 'neg' if gain < 0 else ''}'>{gain:+.1f} "
                    f"[{100 * low:+.1f}, {100 * high:+.1f}]</td><td class='n'>{float(e.get('p_value', 1.0)):.3f}</td>"
                    f"<td class='n'>{esc(e.get('fixed'))} / {esc(e.get('broken'))}</td></tr>")
        for component, text in sorted((e.get("candidate") or {}).items()):
            if text != seed.get(component):
                diffs.append(f"<h4>candidate {i}: <code>{esc(component)}</code></h4>"
                             f"{diff_html(prompt_diff(component, seed.get(component, ''), text))}")
    seed_acc = pct(data.final.get("seed_accuracy"))
    return ("<h3>Candidates validation rejected, on the held-out questions</h3><p class='lead'>A check on selection, "
            f"never a choice: each candidate scored after the final prompts were fixed, beside the seed ({seed_acc}). "
            "Gains are paired over the same questions with a 95% bootstrap CI.</p><div class='card'><table>"
            "<tr><th>#</th><th>round</th><th>change</th><th>validation</th><th>held-out</th><th>gain [95% CI]</th>"
            f"<th>p</th><th>fixed / broken</th></tr>{''.join(rows)}</table>"
            + (f"<details><summary>Each candidate against the seed</summary>{''.join(diffs)}</details>" if diffs else "")
            + "</div>")


def _final_line(data: RunData) -> str:
    """The loop's bottom line: held-out accuracy of the seed and of the best prompts, and why it stopped."""
    f, ck = data.final, data.checkpoint
    if not f and not ck:
        return ""
    bits = []
    if "seed_accuracy" in f and "best_accuracy" in f:
        delta = (f["best_accuracy"] - f["seed_accuracy"]) * 100
        bits.append(f"held-out accuracy <b>{pct(f['seed_accuracy'])} → {pct(f['best_accuracy'])}</b> "
                    f"(<span class='{'plus' if delta >= 0 else 'minus'}'>{delta:+.1f} pp</span>, "
                    f"n={esc(f.get('n', '?'))})")
        if f.get("cases"):
            bits.append(esc(heldout_effect(f).text()))
    method = f.get("method") or (ck.get("plan") or {}).get("method")
    if method:
        bits.append(f"method <b>{esc(method)}</b>")
    best_round = f.get("best_round", ck.get("best_round"))
    if best_round is not None:
        bits.append(f"best round {esc(best_round)}")
    reason = f.get("stop_reason") or ck.get("stop_reason")
    if reason:
        bits.append(f"stopped: {esc(reason)}")
    elif ck.get("status") and ck.get("status") != "done":
        bits.append(f"status: {esc(ck['status'])}")
    if f.get("spend"):
        bits.append(esc(spend_line(f)))
    return f"<p class='final-line card'>{' · '.join(bits)}</p>" if bits else ""


def _round_table(data: RunData) -> str:
    methods = list(dict.fromkeys(p.method for p in data.rounds))
    rows = []
    for m in methods:
        pts = sorted((p for p in data.rounds if p.method == m), key=lambda p: p.round)
        first, last = pts[0], pts[-1]
        best = max(pts, key=lambda p: p.accuracy)
        delta = (last.accuracy - first.accuracy) * 100
        sign = "pos" if delta > 0 else "neg" if delta < 0 else ""
        rows.append(f"<tr><td>{esc(m)}</td><td class='n'>{pct(first.accuracy)}</td>"
                    f"<td class='n'>{pct(last.accuracy)}</td>"
                    f"<td class='n {sign}'>{delta:+.1f} pp</td><td class='n'>{best.round}</td></tr>")
    return ("<table class='rounds'><thead><tr><th>method</th><th class='n'>first</th><th class='n'>last</th>"
            f"<th class='n'>change</th><th class='n'>best round</th></tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table>")


def notes_section(data: RunData) -> str:
    """Files that could not be read, so a missing section is explained rather than silently absent."""
    if not data.notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in dict.fromkeys(data.notes))
    return f"<section id='notes'><h2>Notes</h2><ul class='notes'>{items}</ul></section>"
