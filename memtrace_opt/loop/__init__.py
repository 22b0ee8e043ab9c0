"""The closed loop: attribution-guided prompt optimization, its baselines, and their comparison.

The optimize step of a run: round after round it blames the training failures (:mod:`.blaming`), lets
an optimizer edit only the blamed prompts (``optimizers/``) and keeps a round only when validation
improves; :func:`memtrace_opt.run.optimize` builds its :class:`LoopContext` from a config.
``run_loop(LoopContext(...))`` runs one method end to end with checkpoints (see :mod:`.driver`);
:mod:`.compare` turns finished run dirs into the method × system table. Importing this package
loads no model.
"""

from memtrace_opt.loop.budget import LLMBudgetStopper, Spend, SpendMeter
from memtrace_opt.loop.checkpoint import LoopState, RoundRecord, load_state, save_state
from memtrace_opt.loop.driver import LoopContext, run_loop
from memtrace_opt.loop.plan import GEPA_METHODS, METHODS, LoopData, LoopPlan, split_dataset

__all__ = [
    "GEPA_METHODS", "LLMBudgetStopper", "LoopContext", "LoopData", "LoopPlan", "LoopState", "METHODS",
    "RoundRecord", "Spend", "SpendMeter", "load_state", "run_loop", "save_state", "split_dataset",
]
