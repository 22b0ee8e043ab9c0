"""A served model that dies mid-run: retries, then one clear error and exit code; the resumed run redoes
nothing that was finished. Loopback stub only (tests/test_executor_ray.py's), no model, no Ray."""

from __future__ import annotations

import io
import json
import threading

import pytest

from memtrace_opt import rundir as rd
from memtrace_opt.cli import main
from tests.test_executor_ray import KEY_VAR, Stub, StubHandler


class DyingStub(Stub):
    """The stub, killed (listening socket closed, the request in flight dropped unanswered) by the first
    request that mentions ``die_on``."""

    def __init__(self, port: int = 0, die_on: str | None = None) -> None:
        super(Stub, self).__init__(("127.0.0.1", port), DyingHandler)
        self.requests, self.fail_on, self.lock, self.die_on = 0, None, threading.Lock(), die_on


class DyingHandler(StubHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        server = self.server
        if server.die_on:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if server.die_on.encode() in body:
                server.die_on = None
                threading.Thread(target=lambda: (server.shutdown(), server.server_close()), daemon=True).start()
                self.close_connection = True
                return  # no reply: the connection drops, as when the server process is killed
            self.rfile = io.BytesIO(body)  # the body again, for the stub's handler
        super().do_POST()


def start(server: Stub) -> Stub:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def write_config(tmp_path, port: int):
    task = (f"{{provider: openai_compatible, model: stub, api_base: 'http://127.0.0.1:{port}/v1', "
            f"api_key_env: {KEY_VAR}, num_retries: 2, backoff_s: 0.01, timeout_s: 10}}")
    path = tmp_path / "run.yaml"
    path.write_text(f"run_name: r\noutput_dir: out\nmodels:\n  task: {task}\ndataset: {{name: mini, conversations: [mini-1, mini-2]}}\n"
                    "system: {name: long_context}\neval: {judge: deterministic}\n")
    return path


def test_a_server_killed_mid_run_fails_loudly_and_the_resumed_run_loses_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_VAR, "stub-secret-key")
    first = start(DyingStub(die_on="Lena"))  # mini-2's speaker: killed at that conversation's first answer
    port = first.server_address[1]
    config = write_config(tmp_path, port)

    assert main(["eval", str(config), "--quiet"]) == 3  # LMError's exit code
    captured = capsys.readouterr()
    assert captured.out == ""  # no library banner on stdout
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and f"127.0.0.1:{port}" in err[0] and "stub" in err[0] and "3 attempt" in err[0]
    run_dir = tmp_path / "out" / "r"
    assert rd.done_conversations(run_dir) == ["mini-1"]  # the finished conversation is on disk
    served_first = first.requests

    second = start(DyingStub(port=port))  # the server is back on the same address
    try:
        assert main(["eval", str(config), "--quiet", "--json"]) == 0
    finally:
        second.shutdown()
        second.server_close()
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 12 and rd.done_conversations(run_dir) == ["mini-1", "mini-2"]
    assert second.requests == 6  # mini-2's six questions; nothing of mini-1 was asked again
    assert served_first == 6  # mini-1's six answers (the killing request was never counted)


@pytest.mark.parametrize("field,value", [("num_retries", -1), ("timeout_s", 0), ("backoff_s", -0.5)])
def test_retry_settings_are_checked(tmp_path, field, value):
    from pydantic import ValidationError

    from memtrace_opt.lm.config import ModelConfig

    with pytest.raises(ValidationError, match=field):
        ModelConfig(provider="openai_compatible", model="m", api_base="http://127.0.0.1:1/v1", **{field: value})
