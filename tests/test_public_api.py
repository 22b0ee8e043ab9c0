"""Every name in memtrace_opt.__all__ resolves, and importing the package stays light."""

from __future__ import annotations

import subprocess
import sys

import memtrace_opt


def test_every_public_name_resolves():
    missing = [name for name in memtrace_opt.__all__ if getattr(memtrace_opt, name, None) is None]
    assert missing == []


def test_import_loads_no_heavy_dependency():
    code = "import sys, memtrace_opt; print(sorted(m for m in ('torch', 'mem0', 'dspy', 'xllamacpp') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
