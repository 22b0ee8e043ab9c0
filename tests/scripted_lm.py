"""The scripted LM and embedder the tests use: the public :mod:`memtrace_opt.testing` helpers."""

from memtrace_opt.testing import (  # noqa: F401  (re-exported for the test modules)
    Call, HashEmbedder, ScriptedLM, UnscriptedPrompt, judge_lm, make_conversation, prompt_text,
)
