"""The served-model client against a real loopback HTTP server: retries, Retry-After, one-line errors."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memtrace_opt.errors import LMError
from memtrace_opt.lm.remote import LiteLLMClient, retry_delay
from tests.lm_helpers import user

REPLY = {"id": "c1", "object": "chat.completion", "created": 0, "model": "stub",
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}}


class Stub(ThreadingHTTPServer):
    """Answers each POST with the next scripted (status, headers) pair; the last one repeats."""

    def __init__(self, script):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script, self.requests = list(script), 0


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        server = self.server
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status, headers = server.script[min(server.requests, len(server.script) - 1)]
        server.requests += 1
        body = json.dumps(REPLY if status == 200 else {"error": {"message": f"status {status}"}}).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub(request, monkeypatch):
    monkeypatch.setenv("MEMTRACE_STUB_KEY", "stub-key")
    server = Stub(request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def client(server, waits, retries=3):
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    return LiteLLMClient("openai/stub", api_base=base, api_key_env="MEMTRACE_STUB_KEY", num_retries=retries,
                         timeout_s=10, sleep=waits.append)


@pytest.mark.parametrize("stub", [[(429, {"Retry-After": "7"}), (503, {}), (200, {})]], indirect=True)
def test_rate_limits_and_server_errors_are_retried_honouring_retry_after(stub):
    waits: list[float] = []
    result = client(stub, waits).chat(user("capital of France?"))
    assert result.text == "Paris" and stub.requests == 3
    assert waits[0] >= 7.0 and len(waits) == 2  # the 429's Retry-After, then backoff for the 503


@pytest.mark.parametrize("stub", [[(401, {})]], indirect=True)
def test_a_wrong_key_fails_at_once_with_one_line_naming_host_and_status(stub):
    waits: list[float] = []
    with pytest.raises(LMError) as info:
        client(stub, waits).chat(user("hi"))
    line = str(info.value)
    assert stub.requests == 1 and waits == [] and "\n" not in line
    assert f"127.0.0.1:{stub.server_address[1]}" in line and "status 401" in line and "1 attempt" in line
    assert "stub-key" not in line


@pytest.mark.parametrize("stub", [[(503, {})]], indirect=True)
def test_a_server_that_stays_down_fails_after_the_retries(stub):
    waits: list[float] = []
    with pytest.raises(LMError, match="status 503, 3 attempt"):
        client(stub, waits, retries=2).chat(user("hi"))
    assert stub.requests == 3 and len(waits) == 2


def test_backoff_grows_with_full_jitter_and_is_capped():
    class E(Exception):
        pass

    assert retry_delay(1, E(), base_s=1.0, rng=lambda: 1.0) == 1.0
    assert retry_delay(4, E(), base_s=1.0, rng=lambda: 1.0) == 8.0
    assert retry_delay(20, E(), base_s=1.0, cap_s=60.0, rng=lambda: 1.0) == 60.0
    assert retry_delay(3, E(), rng=lambda: 0.0) == 0.0


def test_a_refused_connection_is_retried_then_named(monkeypatch):
    import socket

    monkeypatch.setenv("MEMTRACE_STUB_KEY", "stub-key")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again when the block ends: nothing listens there
    waits: list[float] = []
    lm = LiteLLMClient("openai/stub", api_base=f"http://127.0.0.1:{port}/v1", api_key_env="MEMTRACE_STUB_KEY",
                       num_retries=1, timeout_s=5, sleep=waits.append)
    with pytest.raises(LMError, match=rf"127\.0\.0\.1:{port} failed \(no response, 2 attempt"):
        lm.chat(user("hi"))
    assert len(waits) == 1
