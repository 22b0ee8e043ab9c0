"""Expose any :class:`LMClient` to DSPy as a ``dspy.LM``, through DSPy 3.4's custom-engine API.

So DSPy programs (and GEPA) run on the same clients as everything else: same disk cache, same
usage ledger, same call observers. DSPy calls ``engine.complete(dspy.lm15.Request)`` and expects a
``dspy.lm15.Response``. DSPy's own response cache is turned off for these LMs: its key ignores
the engine object (two models under one name would share answers) and ``CachedLM`` already caches
with the model's real identity. DSPy's retries are off too: our clients report failures
themselves. Each bridged LM gets a unique model name derived from ``model_id``.
"""

from __future__ import annotations

import itertools
import os
import re
from typing import TYPE_CHECKING, Any

from memtrace_opt.lm.base import LMClient, LMResult

if TYPE_CHECKING:
    import dspy
    from dspy.lm15 import Request, Response

__all__ = ["LMClientEngine", "as_dspy_lm"]

_names = itertools.count(1)
_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_call", "content_filter": "content_filter"}


def _text(content: Any) -> str:
    """Text of a ``Message`` or of ``Request.system`` (a string or a tuple of text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    text = getattr(content, "text", None)
    if isinstance(text, str):
        return text
    parts = getattr(content, "parts", content)
    return "".join(getattr(p, "text", "") or "" for p in parts)


def request_to_chat(request: Request) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """OpenAI-style messages and ``LMClient.chat`` options for one DSPy request."""
    messages: list[dict[str, str]] = []
    if request.system is not None:
        messages.append({"role": "system", "content": _text(request.system)})
    for message in request.messages:
        role = "system" if message.role == "developer" else message.role
        messages.append({"role": role, "content": _text(message)})
    config = request.config
    options: dict[str, Any] = {}
    if config.max_tokens is not None:
        options["max_tokens"] = config.max_tokens
    if config.temperature is not None:
        options["temperature"] = config.temperature
    if config.stop:
        options["stop"] = list(config.stop)
    fmt = config.response_format
    if fmt is not None:
        options["json_schema"] = fmt.get("schema") if fmt.get("type") == "json_schema" else {"type": "object"}
    return messages, options


def result_to_response(result: LMResult, model: str) -> Response:
    """A DSPy response carrying the text, finish reason and token usage of ``result``."""
    from dspy.lm15 import Message, Response, Usage

    return Response(
        id=None,
        model=model,
        message=Message.assistant(result.text),
        finish_reason=_FINISH.get(result.finish_reason, "stop"),
        usage=Usage(input_tokens=result.prompt_tokens, output_tokens=result.completion_tokens),
        provider_data={"memtrace": result.to_dict()},
    )


class LMClientEngine:
    """A DSPy engine that forwards each request to an :class:`LMClient`."""

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"temperature", "max_tokens", "stop", "response_format"})

    def __init__(self, client: LMClient) -> None:
        self.client = client

    def __repr__(self) -> str:
        return f"LMClientEngine({self.client!r})"

    def complete(self, request: Request) -> Response:
        messages, options = request_to_chat(request)
        result = self.client.chat(messages, **options)
        return result_to_response(result, self.client.model_id)

    def stream(self, request: Request) -> Any:
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Nothing to release: the client is borrowed (it may be shared by other roles)."""


def _dspy_name(model_id: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._@-]+", "-", model_id).strip("-") or "model"
    return f"local/{slug}-{next(_names)}"


def as_dspy_lm(client: LMClient, **lm_kwargs: Any) -> dspy.LM:
    """A ``dspy.LM`` backed by ``client``; extra keyword arguments go to ``dspy.LM``.

    ``temperature``/``max_tokens`` left unset here fall through to the client (a factory-built
    client applies the role's configured values).
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import dspy

    lm_kwargs.setdefault("cache", False)
    lm_kwargs.setdefault("num_retries", 0)
    return dspy.LM(_dspy_name(client.model_id), engine=LMClientEngine(client), **lm_kwargs)
