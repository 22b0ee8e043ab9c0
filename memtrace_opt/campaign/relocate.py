"""A run dir moved to another clone: its saved config differs only by where the clone lives.

A loaded config's paths are absolute, so a campaign's run dirs, committed on one machine and continued on
another, would be refused by :func:`memtrace_opt.run.optimize`'s changed-config check. This adopts the new
paths when that is the only change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from memtrace_opt import rundir as rd
from memtrace_opt.config import RunConfig

__all__ = ["adopt_moved_config"]

#: Config fields a campaign overrides (``out=`` supersedes them), so they may differ between machines.
_SUPERSEDED = ("output_dir", "run_name")


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): data}


def _relocated(old: Any, new: Any, old_root: Path, new_root: Path) -> bool:
    """Whether ``old`` is the path ``new`` as it was in the clone at ``old_root``."""
    if not (isinstance(old, str) and isinstance(new, str)):
        return False
    try:
        return Path(old).relative_to(old_root) == Path(new).relative_to(new_root)
    except ValueError:
        return False


def adopt_moved_config(run_dir: Path, cfg: RunConfig) -> bool:
    """Rewrite ``run_dir/config.yaml`` when it differs from ``cfg`` only by the clone's location.

    A loaded config's paths are absolute (dataset.path, cache_dir, output_dir), so a run dir copied to a
    fresh clone elsewhere would be refused by ``optimize``'s changed-config check. The clone's old
    root is what the saved and the new ``cache_dir`` (both ``<clone>/.../NAME/state``) have before their
    common tail; a path under it that maps to the same relative path under the new root is the same file.
    Any other change is left for ``optimize`` to refuse.
    """
    saved = run_dir / rd.CONFIG_FILE
    if not saved.exists() or saved.read_text(encoding="utf-8") == cfg.dump_yaml():
        return False
    old, new = _flat(yaml.safe_load(saved.read_text(encoding="utf-8"))), _flat(cfg.model_dump(mode="json"))
    changed = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k) and k not in _SUPERSEDED]
    old_cache, new_cache = Path(str(old.get("cache_dir"))).parts, Path(str(new.get("cache_dir"))).parts
    tail = 0
    while tail < min(len(old_cache), len(new_cache)) and old_cache[-1 - tail] == new_cache[-1 - tail]:
        tail += 1
    old_root, new_root = Path(*old_cache[:len(old_cache) - tail]), Path(*new_cache[:len(new_cache) - tail])
    if changed and (old_root == new_root
                    or not all(_relocated(old.get(k), new.get(k), old_root, new_root) for k in changed)):
        return False
    rd.write_config(run_dir, cfg)
    return True


