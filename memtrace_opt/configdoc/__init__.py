"""The configuration reference, ``docs/configuration.md``, generated from the config models so it cannot drift.

The config (:mod:`memtrace_opt.config`) is the one place a run's keys, defaults and meanings are
written; :mod:`.render` turns them into the reference, and ``tests/test_config_docs.py`` fails when
the committed file is stale or a key has no meaning::

    python -m memtrace_opt.configdoc --out docs/configuration.md     # regenerate
    python -m memtrace_opt.configdoc --check docs/configuration.md   # exit 1 when stale
"""

from __future__ import annotations

from memtrace_opt.configdoc.render import COMMAND, FieldDoc, Section, field_docs, main, render, sections

__all__ = ["COMMAND", "FieldDoc", "Section", "field_docs", "main", "render", "sections"]
