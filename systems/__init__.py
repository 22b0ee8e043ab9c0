"""Memory systems, fully traced: Long-Context, RAG, Mem0 and EverMemOS, plus what they share.

The trace step of a run: each system is a list of registered operations, each LM call its own op with
its own named prompt, so the graph it records says which prompt every step used.

``get_system(name)`` resolves a config's ``system.name`` (importing the system's module on first
use); ``run_conversation`` (:mod:`.runner`) and ``evaluate_system`` (:mod:`.evaluate`) run one
through ingest → answer → judge with every step recorded in a memory evolution graph;
``make_rerun`` gives the same driver to replay.
Importing this package loads no model and imports neither faiss nor mem0.
"""

from memtrace_opt.systems.base import QA_PROMPT, MemorySystem, SystemSettings
from memtrace_opt.systems.registry import get_system, register_system, system_names

__all__ = ["QA_PROMPT", "MemorySystem", "SystemSettings", "get_system", "register_system", "system_names"]
