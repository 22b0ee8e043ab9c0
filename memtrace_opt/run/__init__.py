"""Runs: evaluate, attribute, optimize and compare — the Python API, and all the CLI commands do.

Each function takes what the matching command takes (a config file *or* a
:class:`~memtrace_opt.config.RunConfig` built in code, a run directory), writes the run directory
(:mod:`memtrace_opt.rundir`) and returns a typed result instead of printing a table; the commands
only parse options and render that result. ``lms`` (clients by role: ``task``, ``judge``,
``reflection``) and ``resources`` (e.g. an embedder) replace the models the config names, which is
how a user tests a system without a model::

    from memtrace_opt import evaluate, attribute
    from memtrace_opt.testing import ScriptedLM

    run = evaluate("my_memory.yaml", lms={"task": ScriptedLM([], default="Paris"), "judge": ScriptedLM([])})
    blame = attribute(run.run_dir, lms=...)

What each step is made of:

- :mod:`.assemble` — config → checked config, run dir, dataset slice, split (no model loaded yet);
- :mod:`.lms` — the run's LM clients by role, built from the config or injected;
- :mod:`.executors` — where conversations run (this process, or Ray tasks);
- :mod:`.evaluating` — :func:`evaluate` → :class:`~memtrace_opt.systems.evaluate.EvaluationRun`;
- :mod:`.attributing` — :func:`attribute` → :class:`~memtrace_opt.rundir.BlameReport`;
- :mod:`.optimizing` — :func:`optimize` (the loop, then the held-out attribution) → :class:`OptimizeRun`;
- :mod:`.comparing` — :func:`compare` → a list of :class:`~memtrace_opt.loop.compare.CompareRow`.
"""

from __future__ import annotations

from memtrace_opt.loop.compare import CompareRow
from memtrace_opt.rundir import BlameReport
from memtrace_opt.run.attributing import attribute
from memtrace_opt.run.comparing import compare
from memtrace_opt.run.evaluating import evaluate
from memtrace_opt.run.lms import Injected
from memtrace_opt.run.optimizing import OptimizeRun, optimize
from memtrace_opt.systems.evaluate import EvaluationRun

__all__ = ["BlameReport", "CompareRow", "EvaluationRun", "Injected", "OptimizeRun", "attribute", "compare",
           "evaluate", "optimize"]
