"""Interop: the memory graph in and out of other tools' shapes, and as text for people.

- :mod:`.smartcomment` — import smartcomment execution graphs (MemTraceBench's graph files) as
  memory graphs that can be queried and attributed (not replayed: no op implementation stands behind them).
- :mod:`.otel` — export a run's graphs as OpenTelemetry traces (GenAI and OpenInference attributes,
  blame as span events) for Langfuse, Arize Phoenix or any OTLP backend (``export otel``).
- :mod:`.run_graphs`, :mod:`.trace_text` — a run directory's graphs from either storage, and one
  question's slice as plain lines (``trace show``).

Apart from :mod:`memtrace_opt.graph` because the graph package is the data model every layer
imports: a foreign format's quirks (smartcomment's sentinels, the OTel conventions' attribute
names, which move between releases) stay here, and nothing in the library below the CLI imports
this package. The OpenTelemetry SDK is optional (``pip install 'memtrace-opt[otel]'``) and is
imported only when an export runs.
"""
