"""RAG: messages are chunked verbatim into documents, embedded, and the top-k are retrieved per question.

Ops, as in the reference implementation:

- ``rag.message_buffer_update`` (BUFFER): each message joins the open buffer ``buffer:<k>``;
- ``rag.finalize_memory_unit`` (BUFFER): a buffer past ``settings.chunk_tokens``, or any buffer at
  the end of a session, becomes a document ``mem:doc<k>`` ``{"text", "date", "turn_ids", "unit"}``
  (one session per document, so each carries its session date);
- ``rag.add`` (EMBEDDING, not memoized: it fills the vector index held in the resources) makes the
  index entry ``index:doc<k>``, the record that retrieval can return;
- ``rag.retrieve`` (RETRIEVAL, no prompt) returns the ``settings.top_k`` entries nearest the
  question as ``retrieved:<qa id>``, then the shared ``qa.answer``.

No ingestion op calls an LM, so every RAG failure is a RetrievalError or a ResponseError; the
graph makes the difference visible (was the evidence document among the retrieved ones?).
"""

from __future__ import annotations

from typing import Any, Mapping

from memtrace_opt.data.model import QA, Session
from memtrace_opt.graph import New, Next, OpContext, Variable, operation
from memtrace_opt.graph.model import BUFFER, EMBEDDING, INTERMEDIATE, MEMORY_UNIT, RETRIEVAL, RETRIEVED
from memtrace_opt.systems.base import MemorySystem, SystemSettings, approx_tokens, format_message
from memtrace_opt.systems.index import EmbeddingIndex
from memtrace_opt.systems.registry import register_system

__all__ = ["INDEX_ENTRY", "INDEX_KEY", "RagSettings", "RagSystem"]

#: Category of ``index:doc<k>`` variables (what the vector index holds).
INDEX_ENTRY = "index-entry"
#: Where the system's vector index lives in the tracer resources.
INDEX_KEY = "rag.index"


class RagSettings(SystemSettings):
    """``chunk_tokens``: close a document once its messages reach this many (approximate) tokens."""

    #: A document closes once its messages reach this many approximate tokens.
    chunk_tokens: int = 256


@operation("rag.message_buffer_update", category=BUFFER)
def _buffer_update(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Append the message to the open buffer (the first message opens it)."""
    return {"buffer": list(inputs.get("buffer") or []) + [inputs["message"]]}


@operation("rag.finalize_memory_unit", category=BUFFER)
def _finalize(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Turn the buffered messages into one dated document."""
    messages = inputs["buffer"]
    return {"doc": {"unit": params["unit"], "text": "\n".join(format_message(m) for m in messages),
                    "date": params.get("date"), "turn_ids": [m.get("turn_id") for m in messages]}}


@operation("rag.add", category=EMBEDDING, memoize=False)
def _add(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Embed the document into the vector index; the index entry is what retrieval returns."""
    doc = inputs["doc"]
    ctx.resources[INDEX_KEY].add([doc["unit"]], [doc["text"]])
    return {"entry": dict(doc)}


@operation("rag.retrieve", category=RETRIEVAL, selects={"index": "unit"})  # only kept documents reach an answer
def _retrieve(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The ``top_k`` index entries most similar to the question, best first, with their scores."""
    entries = {e["unit"]: e for e in inputs.get("index") or []}
    hits = ctx.resources[INDEX_KEY].search(inputs["query"], params["top_k"]) if entries else []
    return {"context": [{**entries[h.id], "score": round(h.score, 4)} for h in hits if h.id in entries]}


@register_system
class RagSystem(MemorySystem):
    """Verbatim chunks of the conversation in a dense index (all-MiniLM-L6-v2 + faiss)."""

    name = "rag"
    default_prompts: Mapping[str, str] = {}
    settings_model = RagSettings
    op_settings = {"rag.retrieve": ("top_k",), "rag.finalize_memory_unit": ("chunk_tokens",)}
    settings: RagSettings

    def __init__(self, tracer: Any, settings: Any = None) -> None:
        super().__init__(tracer, settings)
        self.resources[INDEX_KEY] = EmbeddingIndex(self.resources.get("embedder"))
        self.buffer: Variable | None = None
        self.buffer_tokens = 0
        self.entries: list[Variable] = []

    def ingest_session(self, session: Session, messages: list[Variable]) -> None:
        for message in messages:
            self._buffer(message)
            if self.buffer_tokens >= self.settings.chunk_tokens:
                self._finalize(session.date_time)
        if self.buffer is not None:
            self._finalize(session.date_time)

    def _buffer(self, message: Variable) -> None:
        inputs: dict[str, Any] = {"message": message}
        if self.buffer is None:
            out: Any = New(f"buffer:{len(self.entries) + 1}", INTERMEDIATE, "messages not yet in a document")
        else:
            inputs["buffer"], out = self.buffer, Next(self.buffer)
        self.buffer = self.tracer.call("rag.message_buffer_update", inputs=inputs, outputs={"buffer": out})["buffer"]
        self.buffer_tokens += approx_tokens(format_message(message.value))

    def _finalize(self, date: str | None) -> None:
        k = len(self.entries) + 1
        doc = self.tracer.call("rag.finalize_memory_unit", inputs={"buffer": self.buffer},
                               params={"unit": f"mem:doc{k}", "date": date},
                               outputs={"doc": New(f"mem:doc{k}", MEMORY_UNIT)})["doc"]
        entry = self.tracer.call("rag.add", inputs={"doc": doc}, outputs={"entry": New(f"index:doc{k}", INDEX_ENTRY)})
        self.entries.append(entry["entry"])
        self.buffer, self.buffer_tokens = None, 0

    def retrieve(self, qa: QA, question: Variable) -> Variable:
        return self.tracer.call(
            "rag.retrieve", inputs={"query": question, "index": self.entries}, params={"top_k": self.settings.top_k},
            outputs={"context": New(f"retrieved:{qa.id}", RETRIEVED)},
        )["context"]
