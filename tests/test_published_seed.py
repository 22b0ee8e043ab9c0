"""``system.seed: published``: runs start from the prompts the installed libraries ship.

The published texts are read from the installed mem0ai, so these tests compare against the package
itself: a seed that drifted from what mem0ai ships, or a run that silently fell back to the
project's seed, fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtrace_opt.cli import app
from memtrace_opt.config import load_config
from memtrace_opt.errors import ConfigError
from memtrace_opt.systems.mem0_prompts import load_mem0
from memtrace_opt.systems.published import published_prompts, published_sources
from memtrace_opt.systems.qa import DEFAULT_QA_PROMPT


def _config(tmp_path: Path, system: str, extra: str = "") -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(f"run_name: pub\nsystem:\n  name: {system}\n  seed: published\n{extra}")
    return path


def test_published_answer_prompt_is_mem0ais_own_text(tmp_path):
    shipped = load_mem0().prompts.MEMORY_ANSWER_PROMPT.strip()
    cfg = load_config(_config(tmp_path, "long_context"))
    assert cfg.system.prompts == {"question_answering": shipped}
    assert shipped != DEFAULT_QA_PROMPT


def test_mem0_published_seed_covers_all_three_prompts():
    prompts = published_prompts("mem0")
    assert set(prompts) == {"fact_extraction", "memory_update", "question_answering"}
    assert prompts["memory_update"] == load_mem0().prompts.DEFAULT_UPDATE_MEMORY_PROMPT
    assert set(published_sources("mem0")) == set(prompts)


def test_explicit_prompts_override_the_published_seed(tmp_path):
    cfg = load_config(_config(tmp_path, "rag", "  prompts: {question_answering: 'Answer in one word.'}\n"))
    assert cfg.system.prompts == {"question_answering": "Answer in one word."}


def test_project_seed_leaves_prompts_empty(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("run_name: p\nsystem: {name: long_context}\n")
    cfg = load_config(path)
    assert cfg.system.seed == "project" and cfg.system.prompts == {}


def test_saved_config_reloads_to_the_same_seed(tmp_path):
    cfg = load_config(_config(tmp_path, "long_context"))
    saved = tmp_path / "saved.yaml"
    saved.write_text(cfg.dump_yaml())
    again = load_config(saved)
    assert again.system.prompts == cfg.system.prompts and again.system.seed == "published"


def test_system_without_published_prompts_is_a_config_error_naming_the_field(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(_config(tmp_path, "evermemos"))
    assert err.value.field == "system.seed" and "evermemos" in err.value.message
    with pytest.raises(ConfigError):
        published_prompts("evermemos")


def test_systems_command_names_the_published_components():
    result = CliRunner().invoke(app, ["systems", "--json"])
    assert result.exit_code == 0, result.output
    listed = {row["name"]: row for row in json.loads(result.stdout)}
    assert listed["evermemos"]["published_seed"] == {}
    assert "MEMORY_ANSWER_PROMPT" in listed["long_context"]["published_seed"]["question_answering"]
