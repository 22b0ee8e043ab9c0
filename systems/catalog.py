"""What each registered memory system offers a config: its prompt components, settings and operations.

What a config's ``system.name``, ``system.prompts`` and ``system.settings`` may say, as plain data, so a
user (``memtrace-opt systems``) or a script can write a config without reading the source.
"""

from __future__ import annotations

from typing import Any

from memtrace_opt.graph.ops import REGISTRY, UNOPTIMIZABLE_LM_OPS
from memtrace_opt.systems.published import published_sources
from memtrace_opt.systems.registry import get_system, system_names

__all__ = ["describe_systems"]


def describe_systems() -> list[dict[str, Any]]:
    """``[{name, module, prompts, published_seed, settings, answer_op, ops, ops_without_prompt,
    unoptimizable_lm_ops}]``, by name.

    ``published_seed`` maps each component ``system: {seed: published}`` replaces to the package text
    it is read from (empty: the system ships none).

    ``ops`` are the operations registered by the system's module (the shared answer op included when
    it is the system's); ``ops_without_prompt`` cannot be optimized if they call an LM;
    ``unoptimizable_lm_ops`` are those this process has seen calling one (see ``OpContext.chat``).
    """
    out = []
    for name in system_names():
        cls = get_system(name)
        ops = sorted(n for n, spec in REGISTRY.items()
                     if spec.fn.__module__.startswith(cls.__module__) or n == cls.answer_op)
        out.append({"name": name, "module": cls.__module__, "prompts": sorted(cls.prompts()),
                    "published_seed": published_sources(name),
                    "settings": cls.settings_model().model_dump(mode="json"), "answer_op": cls.answer_op,
                    "ops": ops, "ops_without_prompt": [n for n in ops if REGISTRY[n].prompt is None],
                    "unoptimizable_lm_ops": sorted(set(ops) & UNOPTIMIZABLE_LM_OPS)})
    return out
