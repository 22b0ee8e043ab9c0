"""A campaign's folder and its ``campaign.yaml``: which run config, which methods, what the state is sealed to.

::

    FOLDER/campaign.yaml             config: ../../configs/x.yaml, methods: [none, attributed],
                                     costs: ../../results/bench.json (optional: LM time left), sealed: true|false
    FOLDER/runs/<method>/            each method's run dir
    FOLDER/state/                    the LM answers (committed chunks) and, when sealed, progress.json
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from memtrace_opt.errors import ConfigError
from memtrace_opt.loop.plan import METHODS

__all__ = ["CAMPAIGN_FILE", "PROGRESS_FILE", "RUNS_DIR", "STATE_DIR", "Campaign", "load_campaign"]

CAMPAIGN_FILE = "campaign.yaml"
RUNS_DIR = "runs"
STATE_DIR = "state"
#: A sealed campaign's standing in numbers, committed (its run dirs are not).
PROGRESS_FILE = "progress.json"
_FIELDS = ("config", "methods", "description", "costs", "costs_row", "sealed")


@dataclass(frozen=True)
class Campaign:
    """A validated ``campaign.yaml``: the run config (absolute, resolved against the file) and the methods."""

    folder: Path
    name: str
    config: Path
    methods: tuple[str, ...]
    description: str = ""
    #: A ``bench-lm --json`` result measured on this machine (and its row): sizes the LM time left.
    costs: Path | None = None
    costs_row: str | None = None
    #: The dataset file the state is sealed to (None: committed as plain text).
    sealed_to: Path | None = None


def _dataset_file(config_path: Path) -> Path | None:
    """The dataset file a run config reads (``dataset.path``, against the config's folder); None: bundled data."""
    try:
        data = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # load_config reports it, with the field, when the campaign runs
    dataset = data.get("dataset") if isinstance(data, dict) else None
    path = dataset.get("path") if isinstance(dataset, dict) else None
    return (config_path.parent / path).resolve() if isinstance(path, str) and path.strip() else None


def _sealing(where: str, data: dict[str, Any], config_path: Path) -> Path | None:
    dataset = _dataset_file(config_path)
    sealed = data.get("sealed")
    if sealed is None and dataset is not None:
        raise ConfigError(where, "sealed", f"required: the config reads the dataset file {dataset}; say sealed: true "
                          "to commit the state sealed to that file (data that must not be committed, such as "
                          "LoCoMo), or sealed: false when the file's contents may be committed")
    if sealed is not None and not isinstance(sealed, bool):
        raise ConfigError(where, "sealed", f"expected true or false, found {sealed!r}")
    if sealed and dataset is None:
        raise ConfigError(where, "sealed", "the config reads no dataset file (dataset.path) to seal the state to")
    return dataset if sealed else None


def load_campaign(folder: str | Path) -> Campaign:
    """Read and validate ``FOLDER/campaign.yaml``; any problem is one ConfigError naming the file and field."""
    root = Path(folder)
    path = root / CAMPAIGN_FILE
    where = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(where, None, "file not found: a campaign folder needs a campaign.yaml") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ConfigError(where, None, f"unreadable: {err}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(where, None, f"expected a mapping at the top level, found {type(data).__name__}")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise ConfigError(where, unknown[0], f"unknown field (expected {', '.join(_FIELDS)})")
    config = data.get("config")
    if not isinstance(config, str) or not config.strip():
        raise ConfigError(where, "config", "required: the path of a run config, relative to this file")
    config_path = (root / config).resolve()
    if not config_path.is_file():
        raise ConfigError(where, "config", f"{config} is not a file (resolved to {config_path})")
    methods = data.get("methods")
    if not isinstance(methods, list) or not methods:
        raise ConfigError(where, "methods", f"required: a non-empty list of methods out of {', '.join(METHODS)}")
    for i, m in enumerate(methods):
        if m not in METHODS:
            raise ConfigError(where, f"methods[{i}]", f"unknown method {m!r}; expected one of {', '.join(METHODS)}")
    if len(set(methods)) != len(methods):
        raise ConfigError(where, "methods", "a method is listed twice (each has one run dir)")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(where, "description", "expected text")
    costs = data.get("costs")
    costs_path = None
    if costs is not None:
        if not isinstance(costs, str) or not (root / costs).resolve().is_file():
            raise ConfigError(where, "costs", f"{costs!r} is not a file: a bench-lm --json result, relative to this file")
        costs_path = (root / costs).resolve()
    costs_row = data.get("costs_row")
    if costs_row is not None and (not isinstance(costs_row, str) or costs_path is None):
        raise ConfigError(where, "costs_row", "a row label of the costs file (needs costs:)")
    return Campaign(root, root.resolve().name, config_path, tuple(methods), description, costs_path, costs_row,
                    _sealing(where, data, config_path))
