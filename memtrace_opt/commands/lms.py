"""The commands' LM set-up lives in the library (:mod:`memtrace_opt.lm.run_lms`); re-exported for the commands."""

from memtrace_opt.lm.run_lms import Injected, RunLMs, build_run_lms

__all__ = ["Injected", "RunLMs", "build_run_lms"]
