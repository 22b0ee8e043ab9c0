"""Run config: defaults, path resolution, one-line errors naming file and field, YAML round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtrace_opt.config import RunConfig, load_config
from memtrace_opt.errors import ConfigError

MINIMAL = "run_name: quick\nsystem:\n  name: mem0\n"


def _write(tmp_path: Path, text: str, name: str = "cfg.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_minimal_config_gets_defaults(tmp_path):
    cfg = load_config(_write(tmp_path, MINIMAL))
    assert cfg.run_name == "quick" and cfg.system.name == "mem0" and cfg.seed == 0
    assert cfg.dataset.name == "mini" and cfg.eval.judge == "llm"
    assert cfg.attribution.method == "tracing" and cfg.attribution.max_frontier == 16
    assert cfg.optimizer.method == "attributed" and cfg.optimizer.rounds == 3 and cfg.optimizer.patience == 1
    assert cfg.tuning.enabled is False and cfg.split is None
    assert cfg.models.judge == cfg.models.task and cfg.models.reflection == cfg.models.task
    # an unset output_dir stays relative to the working directory (``make quickstart`` reads runs/)
    assert cfg.output_dir == Path.cwd() / "runs" and cfg.run_dir == Path.cwd() / "runs" / "quick"


def test_full_config_and_relative_paths(tmp_path):
    sub = tmp_path / "configs"
    sub.mkdir()
    text = """
run_name: locomo-3conv
seed: 7
output_dir: ../out
cache_dir: cache
models:
  task: {provider: litellm, model: openai/gpt-4o-mini, api_key_env: OPENAI_API_KEY}
  judge: {model: qwen-0.5b}
dataset:
  name: locomo
  path: ../data/locomo10.json
  audit_path: /abs/audit.json
  conversations: [conv-26, conv-30]
  max_sessions: 4
  max_questions: 10
split: {optimize: [conv-26], validation: [conv-30], heldout: []}
system:
  name: rag
  settings: {top_k: 10}
  prompts: {question_answering: "Answer briefly."}
eval: {judge: deterministic}
attribution: {method: binary_search, evidence: pseudo, counterfactual: true, max_frontier: 8}
optimizer: {method: miprov2, rounds: 2, patience: 0, max_metric_calls: 50, max_llm_calls: 400, minibatch_size: 3}
tuning: {enabled: true, trials: 5, space: {top_k: [5, 10]}}
"""
    cfg = load_config(_write(sub, text))
    assert cfg.output_dir == tmp_path / "out" and cfg.cache_dir == sub / "cache"
    assert cfg.dataset.path == str(tmp_path / "data" / "locomo10.json")
    assert cfg.dataset.audit_path == Path("/abs/audit.json")
    assert cfg.models.judge.model == "qwen-0.5b" and cfg.models.reflection == cfg.models.task
    assert cfg.system.settings == {"top_k": 10} and cfg.optimizer.max_llm_calls == 400
    assert cfg.tuning.space == {"top_k": [5, 10]}


def test_url_dataset_path_is_not_resolved(tmp_path):
    cfg = load_config(_write(tmp_path, MINIMAL + "dataset: {name: locomo, path: 'https://x.org/l.json'}\n"))
    assert cfg.dataset.path == "https://x.org/l.json"


def test_dump_yaml_round_trips(tmp_path):
    cfg = load_config(_write(tmp_path, MINIMAL + "optimizer: {rounds: 5}\n"))
    other = tmp_path / "elsewhere"
    other.mkdir()
    again = load_config(_write(other, cfg.dump_yaml(), "copy.yaml"))
    assert again == cfg


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (MINIMAL + "optimizer: {rounds: 0}\n", "optimizer.rounds", "Input should be greater than 0"),
        (MINIMAL + "optimiser: {rounds: 2}\n", "optimiser", "Extra inputs are not permitted"),
        (MINIMAL + "models: {task: {temprature: 0.1}}\n", "models.task.temprature", "Extra inputs are not permitted"),
        ("system: {name: mem0}\n", "run_name", "Field required"),
        ("run_name: x\nsystem: {name: letta}\n", "system.name", "unknown memory system 'letta'; available: "),
        (MINIMAL + "split: {optimize: [a], heldout: [a]}\n", "split", "'a' is in both optimize and heldout"),
        (MINIMAL + "dataset: {name: longmemeval}\n", "dataset", "longmemeval needs dataset.path"),
        (MINIMAL + "attribution: {max_frontier: -1}\n", "attribution.max_frontier", "greater than 0"),
        (MINIMAL + "eval: {judge: gpt}\n", "eval.judge", "Input should be 'llm', 'deterministic' or 'hybrid'"),
    ],
)
def test_validation_errors_name_file_and_field(tmp_path, text, field, message):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    err = info.value
    assert err.path == str(path) and err.field == field
    assert str(err).startswith(f"config error in {path}: {field}: ")
    assert message in str(err) and "\n" not in err.one_line()
    assert err.exit_code == 2


def test_exact_message_for_a_bad_number(tmp_path):
    path = _write(tmp_path, MINIMAL + "optimizer: {rounds: 0}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"config error in {path}: optimizer.rounds: Input should be greater than 0"


def test_several_errors_become_one(tmp_path):
    path = _write(tmp_path, "seed: x\noptimizer: {rounds: 0}\n")
    with pytest.raises(ConfigError, match=r"run_name: Field required .*\(and 3 more: seed, system, optimizer.rounds\)"):
        load_config(path)


def test_yaml_and_file_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"invalid YAML at line \d+ column \d+: expected ','"):
        load_config(_write(tmp_path, "run_name: x\nsystem: [unclosed\n"))
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="expected a mapping at the top level, found list"):
        load_config(_write(tmp_path, "- a\n- b\n"))


def test_model_validate_without_a_file():
    cfg = RunConfig.model_validate({"run_name": "r", "system": {"name": "long_context"}, "cache_dir": "c"})
    assert cfg.output_dir.is_absolute() and cfg.cache_dir == Path("c")


def test_user_errors_survive_pickling_with_their_message():
    """A ConfigError raised in a Ray worker must reach the driver as itself, not as a decoding error."""
    import pickle

    from memtrace_opt.errors import ConfigError, DatasetError

    for err in (ConfigError("a.yaml", "system.name", "unknown"), DatasetError("d.json", "conv-1/q3", "no answer")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and back.one_line() == err.one_line() and back.exit_code == 2


def test_prompt_appends_add_a_rule_to_the_seed_once_and_the_saved_config_holds_the_result(tmp_path):
    from memtrace_opt.systems.mem0_prompts import default_prompts

    rule = "Leave out dates, times and places."
    text = f"{MINIMAL}  prompt_appends:\n    fact_extraction: '{rule}'\n"
    cfg = load_config(_write(tmp_path, text))
    seed = default_prompts()["fact_extraction"]
    assert cfg.system.prompts["fact_extraction"] == f"{seed.rstrip()}\n\n{rule}"
    assert "memory_update" not in cfg.system.prompts and cfg.system.prompt_appends == {}
    again = load_config(_write(tmp_path, cfg.dump_yaml(), "saved.yaml"))  # reloaded: not appended twice
    assert again.system.prompts == cfg.system.prompts
    with pytest.raises(ConfigError, match="prompt_appends: mem0 has no prompt 'answer'"):
        load_config(_write(tmp_path, text.replace("fact_extraction:", "answer:"), "bad.yaml"))
