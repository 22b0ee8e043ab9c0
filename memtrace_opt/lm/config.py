"""How a model is chosen: the ``models.<role>`` section of a run config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ModelConfig(BaseModel):
    """One model role (task, judge or reflection).

    ``provider: embedded`` runs a GGUF model shipped by a PyPI package in-process (``model`` is a
    tier name: ``qwen-1.5b`` or ``qwen-0.5b``). ``provider: litellm`` sends ``model`` as a
    DSPy/LiteLLM model string (``openai/gpt-4o-mini``, ``ollama_chat/qwen2.5``,
    ``hosted_vllm/...``, ``openai/<name>`` with ``api_base`` for a llama.cpp server).
    ``provider: openai_compatible`` is any server speaking OpenAI chat completions (vLLM,
    llama.cpp, ``memtrace-opt serve``): ``api_base`` is required and ``model`` is the name the
    server knows. Keys are only ever read from the environment variable named in ``api_key_env``.
    """

    model_config = ConfigDict(extra="forbid")

    #: ``embedded`` (in-process llama.cpp, no key), ``litellm`` (a DSPy/LiteLLM model string) or
    #: ``openai_compatible`` (any OpenAI chat-completions server at ``api_base``).
    provider: Literal["embedded", "litellm", "openai_compatible"] = "embedded"
    #: Embedded: the tier (``qwen-1.5b``, ``qwen-0.5b``); litellm: its model string; served: the server's model name.
    model: str = "qwen-1.5b"
    #: The server's URL, ending in ``/v1`` (required for ``openai_compatible``).
    api_base: str | None = None
    #: The environment variable holding the API key (the key itself is never written anywhere).
    api_key_env: str | None = None
    #: Sampling temperature (0: the same prompt gives the same reply, which the disk cache relies on).
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    #: The most tokens one reply may generate (an op may ask for fewer).
    max_tokens: int = Field(default=512, ge=1, le=32768)
    #: Embedded only: the model's context window in tokens.
    n_ctx: int = Field(default=8192, ge=512)
    #: Embedded only: CPU threads for llama.cpp (null: every core).
    threads: int | None = Field(default=None, ge=1)
    #: Embedded only: llama.cpp speculative decoding (same text at temperature 0; faster where outputs
    #: copy text, see ``memtrace-opt bench-lm``). ``none``, ``ngram_mod``, ``ngram_simple``, ``draft`` (the
    #: 0.5B tier drafts), ``draft+ngram_mod``.
    speculative: Literal["none", "ngram_mod", "ngram_simple", "draft", "draft+ngram_mod"] = "none"
    #: Served only (litellm, openai_compatible): seconds to wait for one reply.
    timeout_s: float = Field(default=600.0, gt=0)
    #: Served only: how often a 429, a 5xx, a timeout or a refused connection is retried (exponential
    #: backoff, full jitter, never sooner than the server's Retry-After) before the run stops with one
    #: line naming host, status and model.
    num_retries: int = Field(default=4, ge=0, le=20)
    #: Served only: the backoff base in seconds (retry k waits a random share of base·2^(k-1), at most 60 s).
    backoff_s: float = Field(default=1.0, ge=0)

    @model_validator(mode="after")
    def _served_needs_a_base(self) -> "ModelConfig":
        if self.provider == "openai_compatible" and not self.api_base:
            raise ValueError("provider openai_compatible needs api_base (the server's URL, ending in /v1)")
        return self
