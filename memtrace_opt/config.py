"""The run config: one YAML file describes a whole run, and a copy of it is saved with the results.

Every section forbids unknown keys, so a typo (``optimiser:``) is an error instead of a silently
ignored setting. ``load_config`` turns every failure (missing file, bad YAML, failed validation)
into one :class:`ConfigError` line naming the file and the dotted field. Relative paths are
resolved against the config file's directory, so a config works from any working directory;
an unset ``output_dir`` is ``runs`` under the working directory. Every path of a loaded config is
absolute, so the copy written by :meth:`RunConfig.dump_yaml` means the same thing wherever it lands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator,
)
from pydantic_core import PydanticCustomError

from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.config import ModelConfig

__all__ = [
    "AttributionConfig",
    "DatasetConfig",
    "EvalConfig",
    "ExecutorConfig",
    "ModelsConfig",
    "OptimizerConfig",
    "RunConfig",
    "SplitConfig",
    "SystemConfig",
    "TuningConfig",
    "load_config",
]


def _resolve(value: Any, info: ValidationInfo) -> Any:
    """Make a relative path absolute against ``context["base_dir"]``; URLs and None pass through."""
    if value is None or str(value).startswith(("http://", "https://")):
        return value
    base = (info.context or {}).get("base_dir")
    path = Path(value).expanduser()
    if base is not None and not path.is_absolute():
        path = (Path(base) / path).resolve()
    return path if isinstance(value, Path) else str(path)


RelPath = Annotated[Path, AfterValidator(_resolve)]
RelPathOrURL = Annotated[str, AfterValidator(_resolve)]
Positive = Annotated[int, Field(gt=0)]
DeltaKind = Literal["demos", "rules", "lines"]
_ALL_DELTAS: tuple[DeltaKind, ...] = ("demos", "rules", "lines")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelsConfig(_Section):
    """Model per role; ``judge`` and ``reflection`` default to a copy of ``task``."""

    #: The model that runs the memory system's operations (extraction, update decisions, answers).
    task: ModelConfig = Field(default_factory=ModelConfig)
    #: The model behind the LLM judge (``eval.judge: llm`` or ``hybrid``); null: a copy of ``task``.
    judge: ModelConfig | None = None
    #: The model that proposes prompt edits (rules, rewrites, lines to drop); null: a copy of ``task``.
    reflection: ModelConfig | None = None

    @model_validator(mode="after")
    def _default_roles(self) -> ModelsConfig:
        if self.judge is None:
            self.judge = self.task.model_copy()
        if self.reflection is None:
            self.reflection = self.task.model_copy()
        return self


class DatasetConfig(_Section):
    """Which data, and which slice of it (see :func:`memtrace_opt.data.select`)."""

    #: ``mini``: the bundled made-up dataset (nine conversations, 54 questions); ``locomo`` and
    #: ``longmemeval`` are read from ``path``.
    name: Literal["locomo", "longmemeval", "mini"] = "mini"
    #: The dataset file (or, for LoCoMo, a URL); not needed for ``mini``.
    path: RelPathOrURL | None = None
    #: LoCoMo only: a gold-label audit file; its entries flag questions and carry corrected answers and evidence.
    audit_path: RelPath | None = None
    #: Conversation ids to keep, in this order (null: all).
    conversations: list[str] | None = None
    #: Keep each conversation's first N sessions and only the questions whose evidence lies in them.
    max_sessions: Positive | None = None
    #: Keep at most N scored questions per conversation, in order.
    max_questions: Positive | None = None
    #: Keep only questions with evidence in this session or later: the questions a slice cut before it
    #: never asked (a fresh held-out set for prompts chosen on the shorter slice).
    min_evidence_session: Positive | None = None
    #: Score LoCoMo's category-5 (adversarial) questions too; off, they are loaded but never scored.
    include_adversarial: bool = False

    @model_validator(mode="after")
    def _check(self) -> DatasetConfig:
        if self.name == "longmemeval" and self.path is None:
            raise ValueError("longmemeval needs dataset.path (the data is on Hugging Face only)")
        if self.audit_path is not None and self.name != "locomo":
            raise ValueError("audit_path only applies to the locomo dataset")
        return self


class SplitConfig(_Section):
    """Conversation ids per role; a conversation may serve only one role."""

    #: Training conversations: round r trains on the r-th (wrapping), its failures are attributed and mined.
    optimize: list[str] = Field(default_factory=list)
    #: Selection conversations: GEPA's validation set and the loop's keep/stop test.
    validation: list[str] = Field(default_factory=list)
    #: Held-out conversations: scored once at the end, seed prompts vs the optimized ones.
    heldout: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _disjoint(self) -> SplitConfig:
        seen: dict[str, str] = {}
        for role in ("optimize", "validation", "heldout"):
            for conv in getattr(self, role):
                if conv in seen:
                    raise ValueError(f"conversation {conv!r} is in both {seen[conv]} and {role}")
                seen[conv] = role
        return self


class SystemConfig(_Section):
    """``name``: a registered memory system (``memtrace-opt systems`` lists them); ``module``: a user
    module to import first, which registers its system (``pkg.my_memory``).

    ``seed``: where the prompts start. ``project``: the system's own defaults; ``published``: the
    texts the system's library ships (:mod:`memtrace_opt.systems.published`), filled into ``prompts``
    here, so every consumer of the config (eval, the loop, the report's diffs) starts from them.
    ``prompts`` given in the file override either seed, component by component.
    ``prompt_appends`` adds text (after a blank line) to a component's starting text, whichever seed
    or override it comes from: a rule stated without copying a library's prompt into the config, as
    the controlled-repair experiments do to give one prompt a defect.
    """

    #: A module to import before ``name`` is looked up (your own system: ``my_pkg.my_memory``).
    module: str | None = None  # validated before name: importing it registers the system
    #: The memory system: ``long_context``, ``rag``, ``mem0``, ``evermemos`` or one you registered.
    name: str = Field(min_length=1)
    #: Where the prompts start: ``project`` (the system's own) or ``published`` (the texts its library ships).
    seed: Literal["project", "published"] = "project"
    #: The system's settings (its settings model, tabled below per system; unknown keys are errors).
    settings: dict[str, Any] = Field(default_factory=dict)
    #: ``{component: text}``: starting prompt texts that override the seed, component by component.
    prompts: dict[str, str] = Field(default_factory=dict)
    #: ``{component: text}``: text added after a blank line to a component's starting text (applied once).
    prompt_appends: dict[str, str] = Field(default_factory=dict)

    @field_validator("seed")
    @classmethod
    def _published_exists(cls, seed: str, info: ValidationInfo) -> str:
        from memtrace_opt.systems.published import published_sources

        name = info.data.get("name")
        if seed == "published" and name and not published_sources(name):
            raise ValueError(f"system {name!r} has no published prompts on PyPI to start from; use seed: project")
        return seed

    @model_validator(mode="after")
    def _published_seed(self) -> SystemConfig:
        if self.seed == "published":
            from memtrace_opt.systems.published import published_prompts

            self.prompts = {**published_prompts(self.name), **self.prompts}
        if self.prompt_appends:
            self._apply_appends()
        return self

    def _apply_appends(self) -> None:
        from memtrace_opt.systems.registry import get_system

        defaults = get_system(self.name).prompts()
        for component, text in self.prompt_appends.items():
            if component not in defaults:
                raise ValueError(f"prompt_appends: {self.name} has no prompt {component!r} "
                                 f"(its prompts: {', '.join(sorted(defaults))})")
            base = self.prompts.get(component, defaults[component])
            self.prompts[component] = f"{base.rstrip()}\n\n{text.strip()}"
        self.prompt_appends = {}  # applied once: the saved config holds the filled prompts

    @field_validator("module")
    @classmethod
    def _importable(cls, module: str | None) -> str | None:
        from memtrace_opt.errors import ConfigError
        from memtrace_opt.systems.registry import import_system_module

        if module:
            try:
                import_system_module(module)
            except ConfigError as err:  # a validation error, so the message names the config file and field
                raise ValueError(err.message) from None
        return module

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        from memtrace_opt.errors import ConfigError
        from memtrace_opt.systems.registry import get_system

        try:
            get_system(name)
        except ConfigError as err:
            raise ValueError(err.message) from None
        return name


class EvalConfig(_Section):
    """How an answer is judged right or wrong against the gold answer."""

    #: ``llm``: the judge model decides; ``deterministic``: normalized-text rules only (for weak judge
    #: models); ``hybrid``: the rules where they are sure, the judge model for the rest (paraphrases).
    judge: Literal["llm", "deterministic", "hybrid"] = "llm"


class ExecutorConfig(_Section):
    """Where an evaluation's conversations run; results and graphs are the same whichever is chosen.

    ``local``: in this process, ``workers`` conversations at a time on a thread pool (more than 1 pays
    with a served model that has as many slots: ``memtrace-opt serve --parallel N``, vLLM).
    ``ray``: each conversation is a Ray task, ``workers`` in flight; ``address`` None starts a local
    cluster, ``"auto"`` joins the running one, ``"ray://host:10001"`` a remote one. Ray workers build
    their own LM clients from the config, so the models must be served (see :class:`RunConfig`).
    """

    #: ``local`` (this process) or ``ray`` (one Ray task per conversation).
    kind: Literal["local", "ray"] = "local"
    #: Ray only: null starts a local cluster, ``auto`` joins the running one, ``ray://host:10001`` a remote one.
    address: str | None = None
    #: Conversations evaluated at once (threads for ``local``, tasks in flight for ``ray``).
    workers: Positive = 1

    @model_validator(mode="after")
    def _address_is_for_ray(self) -> ExecutorConfig:
        if self.address is not None and self.kind != "ray":
            raise ValueError("address only applies to kind ray")
        return self


class AttributionConfig(_Section):
    """How a failed question is blamed on the operation that caused it."""

    #: ``tracing``: walk the evolution graph back from the answer to the earliest decisive faulty op (no
    #: LM call); the others are the LLM baselines of the attribution benchmark (they read the run as a log).
    method: Literal["tracing", "flat_log", "all_at_once", "step_by_step", "binary_search"] = "tracing"
    #: ``annotated``: the dataset's evidence turns; ``pseudo``: turns found by BM25 + MiniLM (no annotation needed).
    evidence: Literal["annotated", "pseudo"] = "annotated"
    #: Verify every blame by replaying the graph with the blamed op corrected (and arbitrate grey-zone
    #: ResponseErrors with the raw evidence): one or two answer replays per failure, in ``attribute``,
    #: in the loop's rounds and in ``optimize``'s held-out attribution. Costly for long contexts on a
    #: CPU model (a Long-Context replay re-reads the whole conversation): set false there.
    counterfactual: bool = True
    #: The most variables the tracing walk keeps in its frontier (earliest created first).
    max_frontier: Positive = 16


class OptimizerConfig(_Section):
    """The closed loop: which method edits which prompts, under what budget (docs/loop.md)."""

    #: ``attributed``: edit only the prompts blamed this round, each shown its own failures;
    #: ``unattributed``: every prompt, every failure (the ablation); ``answer_feedback``: GEPA with
    #: score-only feedback; ``miprov2``: DSPy MIPROv2 on the answer prompt; ``none``: no optimization.
    method: Literal["attributed", "unattributed", "answer_feedback", "miprov2", "none"] = "attributed"
    #: The most closed-loop rounds (evaluate, attribute, optimize).
    rounds: Positive = 3
    #: Stop after this many rounds without a validation gain (0: never stop early).
    patience: int = Field(default=1, ge=0)
    #: The optimization's budget in rollouts (one question evaluated under one candidate), for the whole run,
    #: the validation baseline included. A GEPA method refuses a budget below V + rounds × (V + 2 ×
    #: `minibatch_size`), V the validation questions: its first round could not start.
    max_metric_calls: Positive = 200
    #: Stop once this many LM calls (every role, cached or not) are spent; null: no such limit.
    max_llm_calls: Positive | None = None
    #: Training questions per GEPA step (the minibatch a proposal is first scored on).
    minibatch_size: Positive = 4
    #: ``delta``: demo-set and one-rule edits a small reflection model can make (attributed and
    #: unattributed); ``rewrite``: whole-prompt rewrites, for strong reflection models.
    #: ``answer_feedback`` always rewrites (it is GEPA as shipped: score-only feedback).
    proposer: Literal["delta", "rewrite"] = "delta"
    #: Token budget of the worked examples shown in one prompt component.
    demo_tokens: Positive = 400
    #: The most worked examples in one prompt component.
    max_demos: Positive = 4
    #: GEPA's minibatch gate: ``strict`` (a candidate must beat its parent on the minibatch before the
    #: validation set sees it) or ``equal`` (a tie also goes on to validation: on a 6-question minibatch
    #: a tie says little, and the loop still keeps only what improves validation).
    acceptance: Literal["strict", "equal"] = "strict"
    #: Score GEPA's training minibatches by scoped replay: only the ops upstream of the minibatch's
    #: questions run again under a changed ingestion prompt (validation and held-out: full replay).
    scoped_replay: bool = True
    #: After a round improves validation, undo each learned delta of the winner (an added rule, the
    #: example block, an instruction edit) and keep the undo when validation does not fall: among
    #: prompts validation cannot tell apart, the one with fewer changes (memtrace_opt/loop/pruning.py).
    prune: bool = True
    #: The delta kinds the ``delta`` proposer cycles through, in order: ``demos`` (a worked-example
    #: set), ``rules`` (one learned rule), ``lines`` (drop the instruction line blamed for the failures).
    deltas: list[DeltaKind] = Field(default_factory=lambda: list(_ALL_DELTAS), min_length=1)
    #: How a demo step picks its worked examples: ``random`` (every step a random subset) or ``coverage``
    #: (the component's first demo step takes the set whose question and answer forms best cover the
    #: round's failures charged to it, later steps random subsets; optimizers/demo_coverage.py). Not the
    #: default: on training conversations it did not change accuracy (experiments/results/demo_coverage_training/).
    demo_selection: Literal["coverage", "random"] = "random"
    #: After the final comparison, score up to this many candidates that validation rejected on the
    #: held-out questions too, beside the seed (final.json ``audit``): a check on selection, never an
    #: input to it (memtrace_opt/loop/audit.py). Costs one held-out pass per candidate; 0 turns it off.
    audit_candidates: int = Field(default=0, ge=0)


class TuningConfig(_Section):
    """Tuning of the system's non-prompt settings (an Optuna study) once, before prompt optimization."""

    #: Run the study before the first round (every method then reuses its settings).
    enabled: bool = False
    #: Optuna trials, each one evaluation of the training questions with the seed prompts.
    trials: Positive = 20
    #: ``{setting: values}``: ``[5, 10]`` (choices), ``{low: 128, high: 512, step: 64}`` (a range), ``{choices: [...]}``.
    space: dict[str, Any] = Field(default_factory=dict)


class RunConfig(_Section):
    """A whole run. Only ``run_name`` and ``system`` are required."""

    #: The run's name: letters, digits, ``.``, ``_``, ``-``; the run directory is ``output_dir/run_name``.
    run_name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")]
    #: Seed of every random choice (GEPA, demo sets, bootstrap); LM calls run at temperature 0 by default.
    seed: int = 0
    #: Where run directories go (unset: ``runs`` under the working directory).
    output_dir: RelPath = Field(default_factory=lambda: Path("runs").resolve())
    #: The LM disk cache's directory (null: the run directory); share one across methods to reuse answers.
    cache_dir: RelPath | None = None
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    dataset: DatasetConfig = Field(default_factory=DatasetConfig)
    split: SplitConfig | None = None
    system: SystemConfig
    eval: EvalConfig = Field(default_factory=EvalConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    attribution: AttributionConfig = Field(default_factory=AttributionConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    tuning: TuningConfig = Field(default_factory=TuningConfig)

    @model_validator(mode="before")
    @classmethod
    def _eval_workers_moved(cls, data: Any) -> Any:
        """``eval.workers`` (its home for a while) is ``executor.workers``: config copies saved then still load."""
        if not (isinstance(data, dict) and isinstance(data.get("eval"), dict) and "workers" in data["eval"]):
            return data
        evaluation = dict(data["eval"])
        workers = evaluation.pop("workers")
        executor = data.get("executor") or {}
        if isinstance(executor, dict) and "workers" not in executor:
            executor = {**executor, "workers": workers}
        return {**data, "eval": evaluation, "executor": executor}

    @model_validator(mode="after")
    def _ray_needs_served_models(self) -> RunConfig:
        """A Ray worker is a separate process: with ``embedded`` each would load its own copy of the model.
        The error is raised at ``executor.kind`` (a ValidationError keeps its location), the field to change."""
        if self.executor.kind != "ray":
            return self
        for role in ("task", "judge"):
            model = getattr(self.models, role)
            if model is not None and model.provider == "embedded":
                reason = (f"ray needs served models but models.{role} is embedded: Ray workers must reach a served "
                          "model (openai_compatible or litellm), never load their own copy")
                raise ValidationError.from_exception_data(type(self).__name__, [
                    {"type": PydanticCustomError("ray_needs_served_model", reason), "loc": ("executor", "kind"),
                     "input": self.executor.kind}])
        return self

    @property
    def run_dir(self) -> Path:
        """Where this run writes: ``output_dir / run_name``."""
        return self.output_dir / self.run_name

    def dump_yaml(self) -> str:
        """The fully resolved config (defaults filled, paths absolute) as YAML, for the run's copy."""
        # PyYAML is untyped here; without a stream safe_dump returns the YAML as a str.
        text: str = yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
        return text


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a run config; any problem is one ConfigError naming file and field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(p), None, "file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(str(p), None, f"cannot read file: {err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise ConfigError(str(p), None, f"invalid YAML{where}: {getattr(err, 'problem', None) or err}") from None
    if not isinstance(data, dict):
        raise ConfigError(str(p), None, f"expected a mapping at the top level, found {type(data).__name__}")
    try:
        return RunConfig.model_validate(data, context={"base_dir": p.resolve().parent})
    except ValidationError as err:
        raise _config_error(str(p), err) from None


def _config_error(path: str, err: ValidationError) -> ConfigError:
    """The first validation error, with the dotted field path and a count of the others."""
    errors = err.errors(include_url=False)
    first = errors[0]
    field = ".".join(str(part) for part in first["loc"]) or None
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message += " (unknown key; check its spelling and section)"
    elif first["type"] == "missing":
        message = "Field required (missing key)"
    if len(errors) > 1:
        others = ", ".join(".".join(map(str, e["loc"])) or "(top level)" for e in errors[1:4])
        message += f" (and {len(errors) - 1} more: {others}{', ...' if len(errors) > 4 else ''})"
    return ConfigError(path, field, message)
