"""The CLI's commands, one module each, every one exposing ``register(app)`` (see :mod:`memtrace_opt.cli`).

A command parses its options, calls one function of :mod:`memtrace_opt.run` (or of the campaign, report
or data packages) and renders the typed result through :class:`.console.Reporter`: table or ``--json`` on
stdout, progress on stderr. No logic lives here that the Python API would miss; only
:mod:`memtrace_opt.cli` imports this package (``lint-imports`` checks it).
"""
