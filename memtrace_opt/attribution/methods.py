"""Attribution methods by name: the one registry ``attribute``, the loop and the benchmark build them from.

A method is anything with ``name`` and ``attribute(graph, case) -> BlameSignal``
(:class:`AttributionMethod`). Each registry entry says whether it needs an LM (the ``attribution``
role: the run's strongest model, like reflection) and whether it is a variant of tracing that only
the benchmark compares (``tracing+llm``, ``tracing+cf``: ``attribute`` reaches them through
``--llm-content`` and ``--counterfactual`` instead). Adding a method is adding an entry here.

>>> ATTRIBUTE_METHODS
('tracing', 'flat_log', 'all_at_once', 'step_by_step', 'binary_search')
>>> make_attribution_method("tracing", evidence="annotated", embed=None).name
'tracing'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, cast

from memtrace_opt.attribution.baselines import BASELINES, make_baseline
from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.attribution.content import CascadeJudge, LLMContentJudge, TokenJudge
from memtrace_opt.attribution.cost import MeteredLM
from memtrace_opt.attribution.evidence import EmbedFn, default_embed
from memtrace_opt.attribution.failures import FailureCase
from memtrace_opt.errors import ConfigError
from memtrace_opt.graph.model import MemoryGraph
from memtrace_opt.lm.base import LMClient

if TYPE_CHECKING:
    from memtrace_opt.attribution.counterfactual import CounterfactualAttributor
    from memtrace_opt.attribution.tracing import TracingAttributor

__all__ = ["ATTRIBUTE_METHODS", "METHODS", "AttributionMethod", "EmbedChoice", "MethodOptions", "MethodSpec",
           "make_attribution_method", "pick_embed"]


class AttributionMethod(Protocol):
    """What every attribution method is: a name and one blame per failed question."""

    @property
    def name(self) -> str: ...

    def attribute(self, graph: MemoryGraph, case: FailureCase) -> BlameSignal: ...


#: How the pseudo-evidence ranking embeds text: a function, None (BM25 only), or ``"default"`` (MiniLM).
EmbedChoice: TypeAlias = "EmbedFn | None | Literal['default']"


@dataclass(frozen=True)
class MethodOptions:
    """What a method may be built with: the LMs by role, the evidence mode, the embedding, the limits."""

    lms: Mapping[str, LMClient | None]
    evidence: str
    embed: EmbedFn | None
    max_frontier: int
    max_replay_calls: int | None

    def attribution_lm(self, option: str, message: str) -> LMClient:
        """The ``attribution`` LM; a ConfigError naming ``option`` when there is none."""
        lm = self.lms.get("attribution")
        if lm is None:
            raise ConfigError(option, None, message)
        return lm


@dataclass(frozen=True)
class MethodSpec:
    """One registry entry: how to build the method, whether it needs an LM, whether it is a tracing variant."""

    build: Callable[[MethodOptions], AttributionMethod]
    needs_lm: bool
    variant: bool = False


# The tracing modules are imported when a method is built, not with the registry: they load nltk and scipy
# (answer matching; about 2 s), and the CLI reads the registry's names at start-up for its --help.
def _tracing(o: MethodOptions) -> TracingAttributor:
    from memtrace_opt.attribution.tracing import TracingAttributor

    return TracingAttributor(evidence=o.evidence, max_frontier=o.max_frontier, embed=o.embed)


def _tracing_llm(o: MethodOptions) -> TracingAttributor:
    """Tracing that asks the LM where the token content test is inconclusive."""
    from memtrace_opt.attribution.tracing import TracingAttributor

    meter = MeteredLM(o.attribution_lm("--llm-content", "the LLM content judge needs an LM"))
    return TracingAttributor(judge=CascadeJudge(TokenJudge(), LLMContentJudge(meter)), evidence=o.evidence,
                             max_frontier=o.max_frontier, embed=o.embed, meters=[meter], name="tracing+llm")


def _tracing_cf(o: MethodOptions) -> CounterfactualAttributor:
    """Tracing verified by replay on the benchmark's cases (each case carries the replay it needs)."""
    from memtrace_opt.attribution.counterfactual import CounterfactualAttributor

    lms = {role: lm for role, lm in o.lms.items() if lm is not None}
    return CounterfactualAttributor(_tracing(o), rerun=lambda tracer: None, lms=lms,
                                    max_replay_calls=o.max_replay_calls)


def _baseline(name: str) -> Callable[[MethodOptions], AttributionMethod]:
    def build(o: MethodOptions) -> AttributionMethod:
        lm = o.attribution_lm("--method", f"method {name!r} needs an LM")
        return make_baseline(name, lm, evidence=o.evidence, embed=o.embed)
    return build


METHODS: dict[str, MethodSpec] = {
    "tracing": MethodSpec(_tracing, needs_lm=False),
    "tracing+llm": MethodSpec(_tracing_llm, needs_lm=True, variant=True),
    "tracing+cf": MethodSpec(_tracing_cf, needs_lm=True, variant=True),
    **{name: MethodSpec(_baseline(name), needs_lm=True) for name in BASELINES},
}

#: The names ``attribute --method`` takes (the tracing variants are options of ``tracing`` there).
ATTRIBUTE_METHODS: tuple[str, ...] = tuple(name for name, spec in METHODS.items() if not spec.variant)


def make_attribution_method(name: str, lms: Mapping[str, LMClient | None] | None = None, *, evidence: str = "auto",
                            embed: EmbedChoice = "default", max_frontier: int = 16, llm_content: bool = False,
                            max_replay_calls: int | None = None, variants: bool = True) -> AttributionMethod:
    """The attribution method called ``name`` (a key of :data:`METHODS`).

    ``lms`` by role: the LLM methods use ``lms["attribution"]``, ``tracing+cf`` replays with all of them.
    ``evidence``: annotated, pseudo or auto. ``embed``: the pseudo-evidence embedding (see
    :func:`pick_embed`). ``llm_content`` turns ``tracing`` into ``tracing+llm`` (``attribute --llm-content``).
    ``max_replay_calls`` caps each counterfactual replay's LM calls (``tracing+cf``). ``variants=False``
    refuses the tracing variants by name, as ``attribute --method`` does.
    """
    known = METHODS if variants else {n: METHODS[n] for n in ATTRIBUTE_METHODS}
    spec = METHODS["tracing+llm"] if name == "tracing" and llm_content else known.get(name)
    if spec is None:
        raise ConfigError("--method", None, f"unknown method {name!r}; choose one of {', '.join(ATTRIBUTE_METHODS)}")
    options = MethodOptions(dict(lms or {}), evidence, default_embed if embed == "default" else embed, max_frontier,
                            max_replay_calls)
    return spec.build(options)


def pick_embed(embed: EmbedChoice, resources: Mapping[str, object]) -> EmbedChoice:
    """The pseudo-evidence embedding: ``embed`` when given, else the resources' ``embedder`` (tests pass a
    fake one), else ``"default"`` (MiniLM)."""
    if embed != "default":
        return embed
    found = resources.get("embedder")
    return "default" if found is None else cast(EmbedFn, getattr(found, "embed"))
