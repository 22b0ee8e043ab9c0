"""experiments/records: one folder per registered experiment, and its configs still resolve from there."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtrace_opt.config import load_config

REPO = Path(__file__).resolve().parents[1]
RECORDS = sorted(p for p in (REPO / "experiments" / "records").iterdir() if p.is_dir())
CONFIGS = sorted((REPO / "experiments" / "records").glob("*/*.yaml")) + sorted((REPO / "experiments" / "configs").glob("*.yaml"))


@pytest.mark.parametrize("record", RECORDS, ids=lambda p: p.name)
def test_each_record_has_a_record_naming_its_configs_and_is_in_the_index(record):
    text = (record / "RECORD.md").read_text(encoding="utf-8")
    assert "**Status:" in text and "## Question" in text and "## Outcome" in text
    for config in record.glob("*.yaml"):
        assert config.name in text, f"{record.name}/RECORD.md does not name {config.name}"
    assert f"records/{record.name}/RECORD.md" in (REPO / "experiments" / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_configs_load_and_write_to_the_repository_runs_folder(path):
    cfg = load_config(path)
    assert cfg.output_dir == REPO / "runs" or REPO / "runs" in cfg.output_dir.parents
    if cfg.dataset.path and cfg.dataset.name == "locomo":  # LoCoMo is not shipped: it lies beside the repository
        assert Path(cfg.dataset.path) == REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"
        assert cfg.dataset.audit_path == REPO.parent / "shared" / "data" / "locomo" / "locomo_audit_errors.json"
