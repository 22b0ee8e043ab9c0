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


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelsConfig(_Section):
    """Model per role; ``judge`` and ``reflection`` default to a copy of ``task``."""

    task: ModelConfig = Field(default_factory=ModelConfig)
    judge: ModelConfig | None = None
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

    name: Literal["locomo", "longmemeval", "mini"] = "mini"
    path: RelPathOrURL | None = None
    audit_path: RelPath | None = None
    conversations: list[str] | None = None
    max_sessions: Positive | None = None
    max_questions: Positive | None = None
    #: Keep only questions with evidence in this session or later: the questions a slice cut before it
    #: never asked (a fresh held-out set for prompts chosen on the shorter slice).
    min_evidence_session: Positive | None = None
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

    optimize: list[str] = Field(default_factory=list)
    validation: list[str] = Field(default_factory=list)
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

    module: str | None = None  # validated before name: importing it registers the system
    name: str = Field(min_length=1)
    seed: Literal["project", "published"] = "project"
    settings: dict[str, Any] = Field(default_factory=dict)
    prompts: dict[str, str] = Field(default_factory=dict)
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
    judge: Literal["llm", "deterministic", "hybrid"] = "llm"


class ExecutorConfig(_Section):
    """Where an evaluation's conversations run; results and graphs are the same whichever is chosen.

    ``local``: in this process, ``workers`` conversations at a time on a thread pool (more than 1 pays
    with a served model that has as many slots: ``memtrace-opt serve --parallel N``, vLLM).
    ``ray``: each conversation is a Ray task, ``workers`` in flight; ``address`` None starts a local
    cluster, ``"auto"`` joins the running one, ``"ray://host:10001"`` a remote one. Ray workers build
    their own LM clients from the config, so the models must be served (see :class:`RunConfig`).
    """

    kind: Literal["local", "ray"] = "local"
    address: str | None = None
    workers: Positive = 1

    @model_validator(mode="after")
    def _address_is_for_ray(self) -> ExecutorConfig:
        if self.address is not None and self.kind != "ray":
            raise ValueError("address only applies to kind ray")
        return self


class AttributionConfig(_Section):
    method: Literal["tracing", "flat_log", "all_at_once", "step_by_step", "binary_search"] = "tracing"
    evidence: Literal["annotated", "pseudo"] = "annotated"
    #: Verify every blame by replaying the graph with the blamed op corrected (and arbitrate grey-zone
    #: ResponseErrors with the raw evidence): one or two answer replays per failure, in ``attribute``,
    #: in the loop's rounds and in ``optimize``'s held-out attribution. Costly for long contexts on a
    #: CPU model (a Long-Context replay re-reads the whole conversation): set false there.
    counterfactual: bool = True
    max_frontier: Positive = 16


class OptimizerConfig(_Section):
    method: Literal["attributed", "unattributed", "answer_feedback", "miprov2", "none"] = "attributed"
    rounds: Positive = 3
    patience: int = Field(1, ge=0)
    max_metric_calls: Positive = 200
    max_llm_calls: Positive | None = None
    minibatch_size: Positive = 4
    #: ``delta``: demo-set and one-rule edits a small reflection model can make (attributed and
    #: unattributed); ``rewrite``: whole-prompt rewrites, for strong reflection models.
    #: ``answer_feedback`` always rewrites (it is GEPA as shipped: score-only feedback).
    proposer: Literal["delta", "rewrite"] = "delta"
    demo_tokens: Positive = 400
    max_demos: Positive = 4
    #: GEPA's minibatch gate: ``strict`` (a candidate must beat its parent on the minibatch before the
    #: validation set sees it) or ``equal`` (a tie also goes on to validation: on a 6-question minibatch
    #: a tie says little, and the loop still keeps only what improves validation).
    acceptance: Literal["strict", "equal"] = "strict"
    #: The delta kinds the ``delta`` proposer cycles through, in order: ``demos`` (a worked-example
    #: set), ``rules`` (one learned rule), ``lines`` (drop the instruction line blamed for the failures).
    #: Score GEPA's training minibatches by scoped replay: only the ops upstream of the minibatch's
    #: questions run again under a changed ingestion prompt (validation and held-out: full replay).
    scoped_replay: bool = True
    #: After a round improves validation, undo each learned delta of the winner (an added rule, the
    #: example block, an instruction edit) and keep the undo when validation does not fall: among
    #: prompts validation cannot tell apart, the one with fewer changes (memtrace_opt/loop/pruning.py).
    prune: bool = True
    deltas: list[Literal["demos", "rules", "lines"]] = Field(default_factory=lambda: ["demos", "rules", "lines"],
                                                              min_length=1)
    #: How a demo step picks its worked examples: ``random`` (every step a random subset) or ``coverage``
    #: (the component's first demo step takes the set whose question and answer forms best cover the
    #: round's failures charged to it, later steps random subsets; optimizers/demo_coverage.py). Not the
    #: default: on training conversations it did not change accuracy (experiments/results/README.md).
    demo_selection: Literal["coverage", "random"] = "random"
    #: After the final comparison, score up to this many candidates that validation rejected on the
    #: held-out questions too, beside the seed (final.json ``audit``): a check on selection, never an
    #: input to it (memtrace_opt/loop/audit.py). Costs one held-out pass per candidate; 0 turns it off.
    audit_candidates: int = Field(0, ge=0)


class TuningConfig(_Section):
    enabled: bool = False
    trials: Positive = 20
    space: dict[str, Any] = Field(default_factory=dict)


class RunConfig(_Section):
    """A whole run. Only ``run_name`` and ``system`` are required."""

    run_name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")]
    seed: int = 0
    output_dir: RelPath = Field(default_factory=lambda: Path("runs").resolve())
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
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


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
