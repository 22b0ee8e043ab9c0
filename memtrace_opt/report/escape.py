"""The only ways run data may enter the report's HTML: escaped text, escaped attributes, a neutral JSON blob.

Every message, memory, prompt and model reply in a run is untrusted text (a conversation can say
``<script>``; a model can reply with markup). Report code never concatenates raw data into markup:
text and attribute values go through :func:`esc` (``html.escape`` with ``quote=True``, which is safe
in both positions), and the one place data reaches a script is :func:`json_blob`, a
``<script type="application/json">`` element whose ``<``, ``>`` and ``&`` are written as JSON ``\\u``
escapes, so neither ``</script>`` nor ``<!--`` can end or change the element.
"""

from __future__ import annotations

import html
import json
import os
import re
from typing import Any

__all__ = ["clip", "esc", "json_blob", "one_line", "plain"]

# C0/C1 control characters other than tab and newline: invalid in XML (inline SVG) and never meaningful here.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def plain(value: Any) -> str:
    """``value`` as display text: strings as they are, None as empty, anything else compact JSON or repr."""
    if value is None:
        return ""
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=repr)
        except (TypeError, ValueError):
            text = repr(value)
    return _CONTROL.sub("\ufffd", text)


def esc(value: Any) -> str:
    """Escape ``value`` for HTML/SVG text *and* double- or single-quoted attribute values.

    >>> esc('"><img src=x onerror=alert(1)>')
    '&quot;&gt;&lt;img src=x onerror=alert(1)&gt;'
    """
    return html.escape(plain(value), quote=True)


def one_line(value: Any) -> str:
    """Display text folded to one line (runs of whitespace become one space)."""
    return " ".join(plain(value).split())


def clip(value: Any, width: int) -> str:
    """One-line display text cut to ``width`` characters with an ellipsis (not yet escaped).

    >>> clip("a long sentence here", 10)
    'a long se…'
    """
    text = one_line(value)
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def json_blob(element_id: str, data: Any) -> str:
    """``data`` as a ``<script type="application/json">`` element that no string inside it can break out of.

    >>> json_blob("d", {"x": "</script><!--"})
    '<script type="application/json" id="d">{"x": "\\\\u003c/script\\\\u003e\\\\u003c!--"}</script>'
    """
    text = json.dumps(data, ensure_ascii=False, default=str, sort_keys=True)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'
