"""The commands' LM set-up lives in the library (:mod:`memtrace_opt.lm.run_lms`); re-exported for the commands."""

from memtrace_opt.lm.run_lms import RunLMs, build_run_lms, injected, injected_resources, is_injected

__all__ = ["RunLMs", "build_run_lms", "injected", "injected_resources", "is_injected"]
