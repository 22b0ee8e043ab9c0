"""Measuring: what tracing costs, how fast the LM work runs, and how well attribution finds the faulty op.

Everything here measures the rest of the library and nothing else imports it (only the ``bench-*``
commands, ``benchmarks/`` and tests do), so the packages it measures stay free of benchmark code:

- :mod:`.trace`, :mod:`.synthetic` — the tracer's own cost, lineage query time and graph save/load
  speed (``bench-trace``), on a synthetic mem0-shaped graph.
- :mod:`.lm`, :mod:`.lm_run` — LM time per op kind, speculative decoding and scoped replay on the
  embedded model (``bench-lm``).
- :mod:`.serve` — a served model's throughput at several client concurrencies (``bench-serve``).
- :mod:`.inject`, :mod:`.inject_hard` — fault injection: attribution cases with exact ground truth
  (the easy suite drops the evidence; the hard one keeps most of its words).
- :mod:`.attribution`, :mod:`.cases`, :mod:`.attribution_run` — the attribution benchmark: cases from
  injected and real failures, every method scored on the same cases (``bench-attribution``);
  :mod:`.choices` holds its system and method names for the CLI.

Each measurement returns JSON-ready data and prints nothing; the commands render it. Figures are
ratios against a baseline taken in the same run, because absolute timings on a shared two-core
machine mostly measure the other processes.
"""
