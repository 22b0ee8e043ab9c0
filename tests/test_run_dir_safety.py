"""Two processes on one run dir, and writers of one file: refused at once, never corrupted (issue #14, item 2)."""

from __future__ import annotations

import threading

import pytest

from memtrace_opt.atomic import atomic_write_text
from memtrace_opt.cli import main
from memtrace_opt.run.lms import Injected
from memtrace_opt.graph import MemoryGraph
from memtrace_opt.graph.io_json import load_json, save_json
from memtrace_opt.graph.model import Variable
from memtrace_opt.rundir.lock import RunDirBusyError, run_lock
from tests.scripted_lm import HashEmbedder
from tests.test_eval_cli import scripted, write_config


def test_a_second_command_on_a_busy_run_dir_is_one_line_and_exit_3(tmp_path, capsys):
    cfg = write_config(tmp_path, "long_context")
    run = tmp_path / "out" / "t_long_context"
    with run_lock(run, "optimize"):
        inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
        assert main(["eval", str(cfg), "--quiet"], injected=inj) == 3
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is in use by another memtrace-opt process (pid " in err
        assert "memtrace-opt optimize" in err
        assert not (run / "results.json").exists()  # the refused command wrote nothing
    inj = Injected.of(scripted(), resources={"embedder": HashEmbedder()})
    assert main(["eval", str(cfg), "--quiet"], injected=inj) == 0


def test_the_lock_is_released_when_the_holder_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with run_lock(tmp_path, "eval"):
            raise RuntimeError("boom")
    with run_lock(tmp_path, "eval"):
        with pytest.raises(RunDirBusyError):
            with run_lock(tmp_path, "eval"):
                pass


def test_concurrent_writers_of_one_graph_file_never_collide(tmp_path):
    graph = MemoryGraph({"run_id": "x"})
    for i in range(200):
        graph.add_variable(Variable(f"m{i}", 1, "message", "text " * 20, i))
    path = tmp_path / "graphs" / "c.jsonl.gz"
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(5):
                save_json(graph, path)
        except BaseException as err:  # collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(load_json(path).variables) == 200
    assert sorted(p.name for p in path.parent.iterdir()) == ["c.jsonl.gz"]  # no temp file left behind


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    target = atomic_write_text(tmp_path / "a.json", "old")
    with pytest.raises(ZeroDivisionError):
        from memtrace_opt.atomic import atomic_path

        with atomic_path(target) as tmp:
            tmp.write_text("half")
            1 / 0
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_atomic_and_plain_files_get_one_mode(tmp_path):
    import stat

    from memtrace_opt.atomic import FILE_MODE

    atomic = atomic_write_text(tmp_path / "a.json", "{}")
    plain = tmp_path / "b.log"
    plain.write_text("x")
    assert stat.S_IMODE(atomic.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == FILE_MODE
