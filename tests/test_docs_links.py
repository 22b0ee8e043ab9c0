"""Every relative link in the user-facing Markdown resolves: README.md, docs/*.md, experiments/**/*.md.

A link's target must be an existing file or folder, resolved against the linking file's folder; a
``#fragment`` into a Markdown file must name one of its headings (GitHub's slug) or an explicit
``<a id="...">``. URLs and mail links are not checked. Code spans and fenced blocks are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: Files the README names that the maintainer produces from a real quickstart run and commits; a link to
#: one of them is accepted while it is missing. Remove an entry once its file is committed.
PENDING: set[str] = set()  # files the docs may link to before they exist (none now)

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def documents() -> list[Path]:
    found = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "experiments").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def links(text: str) -> list[str]:
    """The link targets of a Markdown text, outside code.

    >>> links("see [a](x.md#b), ![img](p.png) and `[not](y.md)`\\n```\\n[no](z.md)\\n```")
    ['x.md#b', 'p.png']
    """
    text = _CODE.sub("", _FENCE.sub("", text))
    return _LINK.findall(text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading.

    >>> slug("LM time per operation (`bench-lm`)")
    'lm-time-per-operation-bench-lm'
    """
    text = re.sub(r"[`*_\[\]]|\]\([^)]*\)", "", heading.lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(h) for h in _HEADING.findall(text)} | set(_ANCHOR.findall(text))


def broken_links(doc: Path) -> list[str]:
    out = []
    for target in links(doc.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (doc.parent / path_part).resolve() if path_part else doc
        try:
            rel = resolved.relative_to(REPO).as_posix()
        except ValueError:
            rel = None
        if not resolved.exists():
            if rel not in PENDING:
                out.append(f"{target}: no such file")
            continue
        if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            out.append(f"{target}: no heading or anchor #{fragment}")
    return out


@pytest.mark.parametrize("doc", documents(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(doc):
    assert not broken_links(doc), broken_links(doc)


def test_the_checker_catches_a_broken_link(tmp_path):
    doc = tmp_path / "x.md"
    (tmp_path / "there.md").write_text("# A heading\n")
    doc.write_text("[ok](there.md#a-heading) [bad](missing.md) [frag](there.md#nope) [web](https://example.org/x)\n")
    assert broken_links(doc) == ["missing.md: no such file", "there.md#nope: no heading or anchor #nope"]


def test_the_readme_is_short():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 250
