"""Prompt optimizers that touch a memory system only through a text-component adapter.

The optimize step's engines: the closed loop (:mod:`memtrace_opt.loop`) hands them the blamed
components; blame reaches them through one seam, the component selector and the reflective records.

A candidate is ``{component: text}``; :class:`MemoryPromptAdapter` evaluates it by replaying
recorded graphs, :mod:`.feedback` and :mod:`.selectors` carry blame into GEPA, :class:`ReflectionProposer`
turns a reflection LM's reply into a new prompt, :func:`run_gepa` runs one GEPA optimization and
:func:`run_miprov2` the MIPROv2 instruction-only baseline. Importing this package loads no model.
"""

from memtrace_opt.optimizers.adapter import Attributor, MemoryPromptAdapter, prompt_set_sha
from memtrace_opt.optimizers.backend import RunnerBackend, SystemBackend, changed_prompts
from memtrace_opt.optimizers.cases import CaseTrace, QACase, cases_of
from memtrace_opt.optimizers.feedback import FEEDBACK_MODES, reflective_records, unattributed_signal
from memtrace_opt.optimizers.gepa_run import GepaOutcome, run_gepa
from memtrace_opt.optimizers.graphs import GraphStore, StoredGraph
from memtrace_opt.optimizers.proposer import Proposal, ReflectionProposer, extract_instruction, validate_instruction
from memtrace_opt.optimizers.selectors import AllSelector, BlamedSelector, RoundRobinSelector, selector_for

__all__ = [
    "AllSelector", "Attributor", "BlamedSelector", "CaseTrace", "FEEDBACK_MODES", "GepaOutcome",
    "GraphStore", "MemoryPromptAdapter", "Proposal", "QACase", "ReflectionProposer", "RoundRobinSelector",
    "RunnerBackend", "StoredGraph", "SystemBackend", "cases_of", "changed_prompts", "extract_instruction",
    "prompt_set_sha", "reflective_records", "run_gepa", "selector_for", "unattributed_signal",
    "validate_instruction",
]
