"""What the attribution benchmark can run, as plain names.

Apart from :mod:`.attribution_run` because the CLI reads these at start-up for its help text and
option checks: this module imports nothing, so ``memtrace-opt --help`` stays instant.
"""

from __future__ import annotations

__all__ = ["ALL_METHODS", "SYSTEMS"]

#: The memory systems a benchmark run may pool cases from.
SYSTEMS = ("rag", "mem0", "evermemos", "long_context")
#: The attribution methods :func:`~memtrace_opt.bench.attribution_run.bench_methods` builds, in report order.
ALL_METHODS = ("tracing", "tracing+llm", "tracing+cf", "flat_log", "all_at_once", "step_by_step", "binary_search")
