"""The report's header and run summary: what ran, on what, how well, and what it cost."""

from __future__ import annotations

from collections import Counter
from typing import Any

from memtrace_opt.report.charts import ci_bar
from memtrace_opt.report.collect import RunData
from memtrace_opt.report.escape import esc
from memtrace_opt.report.fmt import count, duration, pct
from memtrace_opt.report.graph_svg import error_tag

__all__ = ["header_html", "summary_section"]


def _model(cfg: Any) -> str:
    if not isinstance(cfg, dict):
        return ""
    return f"{cfg.get('model', '?')} ({cfg.get('provider', '?')})"


def _dataset(data: RunData) -> str:
    ds = data.config.get("dataset") or {}
    name = ds.get("name") or data.summary.get("dataset") or ""
    parts = [str(name)] if name else []
    convs = data.summary.get("conversations") or ds.get("conversations")
    if isinstance(convs, list) and convs:
        parts.append(f"{len(convs)} conversation{'s' * (len(convs) != 1)}")
    for key, label in (("max_sessions", "≤{} sessions"), ("max_questions", "≤{} questions")):
        if ds.get(key):
            parts.append(label.format(ds[key]))
    split = data.config.get("split") or {}
    roles = [f"{role} {len(split[role])}" for role in ("optimize", "validation", "heldout") if split.get(role)]
    if roles:
        parts.append("split: " + ", ".join(roles))
    return " · ".join(parts)


def _stat(key: str, value: str, sub: str = "", cls: str = "") -> str:
    return (f'<div class="stat {cls}"><div class="k">{esc(key)}</div><div class="v">{esc(value)}</div>'
            f'<div class="s">{esc(sub)}</div></div>')


def header_html(data: RunData, title: str) -> str:
    """The dark header band: run name, what ran on what, and the big numbers."""
    s, usage = data.summary, data.lm_usage
    models = data.config.get("models") or {}
    meta = [f"system <b>{esc(data.system)}</b>"] if data.system else []
    if (data.config.get("system") or {}).get("seed") == "published":  # where the prompts started, if not ours
        meta.append("seed prompts <b>published</b>")
    if _dataset(data):
        meta.append(f"data <b>{esc(_dataset(data))}</b>")
    for role in ("task", "judge", "reflection"):
        if models.get(role):
            meta.append(f"{esc(role)} model <b>{esc(_model(models[role]))}</b>")
    judge = s.get("judge") or (data.config.get("eval") or {}).get("judge")
    if judge:
        meta.append(f"judge <b>{esc(judge)}</b>")
    stats = []
    if "accuracy" in s:
        ci = s.get("accuracy_ci") or [None, None]
        sub = f"95% CI {pct(ci[0], 0)}–{pct(ci[1], 0)}" if ci[0] is not None else ""
        stats.append(_stat("accuracy", pct(s["accuracy"]), sub, "big"))
    n = s.get("n", len(data.results) or None)
    if n is not None or data.failed:
        blamed = sum(f.blame is not None for f in data.failed)
        stats.append(_stat("failed questions", f"{len(data.failed)}", f"of {count(n)} scored · {blamed} attributed"))
    if "f1" in s:
        stats.append(_stat("F1 / BLEU-1", f"{s['f1']:.2f}", f"BLEU-1 {s.get('bleu1', 0):.2f}"))
    if usage:
        toks = (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
        calls = usage.get("lm_calls", usage.get("llm_calls"))  # evaluation summaries vs the loop's spend
        stats.append(_stat("LLM calls", count(calls), f"{count(usage.get('cached_calls'))} cached"))
        stats.append(_stat("tokens", count(toks), f"{count(usage.get('prompt_tokens'))} in · "
                                                  f"{count(usage.get('completion_tokens'))} out"))
    if data.wall_s is not None:
        llm = f"LLM {duration(usage['latency_s'])}" if isinstance(usage.get("latency_s"), (int, float)) else ""
        stats.append(_stat("wall time", duration(data.wall_s), llm))
    return (f'<header class="top"><div class="brand">memtrace-opt run report</div><h1>{esc(title)}</h1>'
            f'<div class="meta">{" · ".join(meta)}</div><div class="stats">{"".join(stats)}</div></header>')


def summary_section(data: RunData) -> str:
    """Accuracy per category with CIs, failures and their top error type, and LM usage per op."""
    cats = data.summary.get("per_category") or {}
    if not cats and not data.usage.get("by_op"):
        return ""
    failed_by_cat = Counter(f.category for f in data.failed)
    top_error: dict[str, Counter[str | None]] = {}
    for f in data.failed:
        if f.blame is not None:
            top_error.setdefault(f.category, Counter())[f.blame.error_type] += 1
    rows = []
    for cat, b in sorted(cats.items(), key=lambda kv: -(kv[1].get("n") or 0)):
        ci = b.get("accuracy_ci") or [None, None]
        common = top_error.get(cat, Counter()).most_common(1)
        rows.append(
            f"<tr><td>{esc(cat)}</td><td class='n'>{count(b.get('n'))}</td>"
            f"<td class='acc'>{ci_bar(b.get('accuracy') or 0.0, ci[0], ci[1])} <b>{pct(b.get('accuracy'))}</b> "
            f"<span class='muted'>[{pct(ci[0], 0)}, {pct(ci[1], 0)}]</span></td>"
            f"<td class='n'>{b.get('f1', 0):.2f}</td><td class='n'>{b.get('bleu1', 0):.2f}</td>"
            f"<td class='n'>{failed_by_cat.get(cat, 0)}</td><td>{error_tag(common[0][0]) if common else ''}</td></tr>")
    table = ("<table class='cats'><thead><tr><th>category</th><th class='n'>n</th><th>accuracy (95% CI)</th>"
             "<th class='n'>F1</th><th class='n'>BLEU-1</th><th class='n'>failed</th><th>most common error</th></tr>"
             f"</thead><tbody>{''.join(rows)}</tbody></table>") if rows else ""
    return (f'<section id="summary"><h2>Run summary</h2><p class="lead">Accuracy is the judge score; the bar shows '
            f'it with its bootstrap 95% confidence interval.</p><div class="card">{table}</div>{_usage_table(data)}'
            "</section>")


def _usage_table(data: RunData) -> str:
    by_op = data.usage.get("by_op") or {}
    if not isinstance(by_op, dict) or not by_op:
        return ""
    rows = sorted(by_op.items(), key=lambda kv: -_tokens(kv[1]))
    body = "".join(
        f"<tr><td><code>{esc(name)}</code></td><td class='n'>{count(r.get('ops'))}</td>"
        f"<td class='n'>{count(r.get('lm_calls'))}</td><td class='n'>{count(r.get('cached_calls'))}</td>"
        f"<td class='n'>{count(r.get('prompt_tokens'))}</td><td class='n'>{count(r.get('completion_tokens'))}</td>"
        f"<td class='n'>{duration(r.get('latency_s'))}</td></tr>" for name, r in rows)
    return ("<details class='card usage'><summary>LLM usage per operation</summary><table><thead><tr><th>operation</th>"
            "<th class='n'>runs</th><th class='n'>LLM calls</th><th class='n'>cached</th><th class='n'>prompt tok</th>"
            f"<th class='n'>completion tok</th><th class='n'>LLM time</th></tr></thead><tbody>{body}</tbody></table>"
            "</details>")


def _tokens(row: dict[str, Any]) -> int:
    return int((row.get("prompt_tokens") or 0) + (row.get("completion_tokens") or 0))
