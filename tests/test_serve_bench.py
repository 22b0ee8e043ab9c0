"""``bench-serve`` against a loopback stub: every level sends the same requests, ratios are to the first
level, bad levels are refused (the real figures come from the command on a real server: a benchmark)."""

from __future__ import annotations

import json
import threading

import pytest

from memtrace_opt.cli import main
from tests.test_executor_ray import KEY_VAR, Stub


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv(KEY_VAR, "stub-secret-key")
    server = Stub()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_each_level_sends_the_same_requests_and_reports_ratios_to_the_first(stub, capsys):
    url = f"http://127.0.0.1:{stub.server_address[1]}/v1"
    assert main(["bench-serve", "--url", url, "--model", "stub", "--api-key-env", KEY_VAR, "--levels", "1,2,4",
                 "--requests", "5", "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert [r["concurrency"] for r in result["levels"]] == [1, 2, 4]
    assert all(r["requests"] == 5 and r["completion_tokens"] == 10 for r in result["levels"])
    assert result["levels"][0]["requests_per_s_ratio"] == 1.0 and result["levels"][0]["tokens_per_s_ratio"] == 1.0
    assert stub.requests == 1 + 3 * 5  # one warm-up, then five per level
    assert captured.err.strip().startswith("bench-serve: best at concurrency")


def test_bad_levels_are_refused_in_one_line(stub, capsys):
    url = f"http://127.0.0.1:{stub.server_address[1]}/v1"
    for bad in ("1,two", "0,2", ""):
        assert main(["bench-serve", "--url", url, "--api-key-env", KEY_VAR, "--levels", bad]) == 2
        assert "--levels" in capsys.readouterr().err
