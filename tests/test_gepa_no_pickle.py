"""A run dir never makes optimize execute code: GEPA state is not pickled there nor read back (issue #14, item 4)."""

from __future__ import annotations

import pickle

from memtrace_opt.loop import run_loop
from tests.test_loop_closed import make_ctx


class Boom:
    def __reduce__(self):
        return (exec, ("raise SystemExit('unpickled code ran')",))


def test_gepa_leaves_no_pickle_and_resume_ignores_a_planted_one(tmp_path):
    ctx, _, _ = make_ctx(tmp_path, rounds=1)
    run_loop(ctx)
    assert not list(tmp_path.rglob("*.bin")) and not list(tmp_path.rglob("*.pkl"))
    assert (tmp_path / "rounds" / "round_1" / "gepa" / "gepa_log.txt").exists()

    other = tmp_path / "other"
    planted = other / "rounds" / "round_1" / "gepa" / "gepa_state.bin"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(pickle.dumps(Boom()))
    state = run_loop(make_ctx(other, rounds=1)[0])  # a planted state file is never loaded
    assert state.status == "done"
