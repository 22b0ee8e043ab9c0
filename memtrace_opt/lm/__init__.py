"""The LM layer: one small client interface, the embedded and remote models behind it, and the
wrappers every call goes through (disk cache, usage accounting, call observers), plus the DSPy
bridge and sentence embeddings.

Every layer above calls a model only through :class:`LMClient`; :mod:`memtrace_opt.run.lms` builds the
clients a run uses from its config (or takes injected ones).

Typical use::

    from memtrace_opt.lm import ModelConfig, UsageLedger, build_lm, as_dspy_lm, observe_calls

    ledger = UsageLedger()
    lm = build_lm(ModelConfig(), cache_dir=run_dir, ledger=ledger, role="task")
    with observe_calls() as calls:
        result = lm.chat([{"role": "user", "content": "Hi"}], max_tokens=32)
    dspy_lm = as_dspy_lm(lm)

Importing this package loads no model and imports neither DSPy, LiteLLM nor torch.
"""

from memtrace_opt.lm.base import LMClient, LMResult, LMRoles
from memtrace_opt.lm.cache import CachedLM, cache_key
from memtrace_opt.lm.config import ModelConfig
from memtrace_opt.lm.dspy_bridge import LMClientEngine, as_dspy_lm
from memtrace_opt.lm.embedded import EmbeddedLlama, LazyEmbedded, get_embedded
from memtrace_opt.lm.embedded_model import TIERS, embedded_model_id, ensure_model, models_dir
from memtrace_opt.lm.embeddings import EMBEDDING_DIM, Embedder, get_embedder
from memtrace_opt.lm.factory import ConfiguredLM, build_base, build_lm, build_roles
from memtrace_opt.lm.observe import observe_calls
from memtrace_opt.lm.remote import LiteLLMClient
from memtrace_opt.lm.usage import AccountedLM, UsageLedger, UsageTotals

__all__ = [
    "AccountedLM",
    "CachedLM",
    "ConfiguredLM",
    "EMBEDDING_DIM",
    "EmbeddedLlama",
    "Embedder",
    "LMClient",
    "LMClientEngine",
    "LMResult",
    "LMRoles",
    "LazyEmbedded",
    "LiteLLMClient",
    "ModelConfig",
    "TIERS",
    "UsageLedger",
    "UsageTotals",
    "as_dspy_lm",
    "build_base",
    "build_lm",
    "build_roles",
    "cache_key",
    "embedded_model_id",
    "ensure_model",
    "get_embedded",
    "get_embedder",
    "models_dir",
    "observe_calls",
]
