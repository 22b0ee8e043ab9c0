"""A prompt rewrite as a coloured diff: removed lines red, added lines green, changed words marked.

Input is unified-diff text (the optimizer's ``.diff`` file, or one computed from the seed); a removed
line directly replaced by an added one also gets word-level ``<del>``/``<ins>`` marks, so a one-word
change in a long instruction is visible at a glance.
"""

from __future__ import annotations

import difflib
import re

from memtrace_opt.loop.artifacts import diff_rows, diff_stats
from memtrace_opt.report.escape import esc

__all__ = ["diff_html", "diff_stats"]  # diff_stats lives in loop.artifacts (compare counts lines too)

_TOKENS = re.compile(r"\s+|\w+|[^\w\s]")


def _words(old: str, new: str) -> tuple[str, str]:
    """Both lines escaped, with the tokens that differ wrapped in ``<del>`` / ``<ins>``."""
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    left, right = [], []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        x, y = esc("".join(a[i1:i2])), esc("".join(b[j1:j2]))
        if tag == "equal":
            left.append(x)
            right.append(y)
            continue
        if x:
            left.append(f"<del>{x}</del>")
        if y:
            right.append(f"<ins>{y}</ins>")
    return "".join(left), "".join(right)


def _row(kind: str, sign: str, body_html: str) -> str:
    return f'<span class="dl {kind}"><span class="sign">{esc(sign)}</span>{body_html}</span>'


def diff_html(diff_text: str) -> str:
    """The diff as a ``<pre class="diff">`` block; every line is escaped."""
    rows = diff_rows(diff_text.splitlines())
    out: list[str] = []
    i = 0
    while i < len(rows):
        kind, text = rows[i]
        if kind != "del":
            sign = {"add": "+", "ctx": " "}.get(kind, "")
            out.append(_row(kind, sign, esc(text)))
            i += 1
            continue
        j = i
        while j < len(rows) and rows[j][0] == "del":
            j += 1
        k = j
        while k < len(rows) and rows[k][0] == "add":
            k += 1
        out += _block([t for _, t in rows[i:j]], [t for _, t in rows[j:k]])
        i = k
    return '<pre class="diff">' + "".join(out) + "</pre>"


def _block(removed: list[str], added: list[str]) -> list[str]:
    """A run of removed lines and the added lines right after it, paired for word marks when similar."""
    rows_del, rows_add = [], []
    for n in range(max(len(removed), len(added))):
        old = removed[n] if n < len(removed) else None
        new = added[n] if n < len(added) else None
        if old is not None and new is not None and difflib.SequenceMatcher(None, old, new).ratio() > 0.4:
            a, b = _words(old, new)
            rows_del.append(_row("del", "-", a))
            rows_add.append(_row("add", "+", b))
            continue
        if old is not None:
            rows_del.append(_row("del", "-", esc(old)))
        if new is not None:
            rows_add.append(_row("add", "+", esc(new)))
    return rows_del + rows_add
