"""``memtrace-opt serve``: refusals before anything loads, and (slow) a real server answering like the in-process model."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.config import ModelConfig
from memtrace_opt.lm.serve import is_loopback, start_server


def test_loopback_hosts():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.org")


def test_the_server_refuses_to_start_without_a_key_or_beyond_loopback(monkeypatch):
    monkeypatch.delenv("MEMTRACE_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="MEMTRACE_TEST_KEY is not set"):
        start_server(api_key_env="MEMTRACE_TEST_KEY")
    monkeypatch.setenv("MEMTRACE_TEST_KEY", "k")
    with pytest.raises(ConfigError, match="not a loopback address"):
        start_server(api_key_env="MEMTRACE_TEST_KEY", host="0.0.0.0")


def test_a_served_provider_needs_its_base_url():
    with pytest.raises(ValueError, match="needs api_base"):
        ModelConfig(provider="openai_compatible", model="m")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, key: str | None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, ConnectionError):
        return 0  # not listening yet: the model is still loading


def _serve(n_ctx: int):
    """A real `memtrace-opt serve` process on a free loopback port: ``(base URL, key, process)``; stopped
    with SIGTERM afterwards, and its output checked (clean stop, the key never printed)."""
    key, port = secrets.token_urlsafe(16), _free_port()
    cli = Path(sys.executable).parent / "memtrace-opt"
    proc = subprocess.Popen([str(cli), "serve", "--port", str(port), "--parallel", "1", "--n-ctx", str(n_ctx)],
                            env={**os.environ, "MEMTRACE_SERVE_KEY": key}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while _get(f"{base}/models", key) != 200:
            assert proc.poll() is None, f"serve exited early: {proc.stdout.read() if proc.stdout else ''}"
            assert time.monotonic() < deadline, "the server did not come up in 300 s"
            time.sleep(1)
        yield base, key, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "server stopped" in out, out
    assert json.dumps(out).count(key) == 0  # the key is never printed


@pytest.fixture
def server():
    yield from _serve(8192)


#: A context size no other test gives the in-process model, so the e2e test gets fresh copies on both
#: sides: llama.cpp reuses a slot's cached prefix, and a prefix computed in other batches can tip a
#: near-tie, so the two histories must match for the outputs to (they do, fresh on both sides).
E2E_N_CTX = 6144


@pytest.fixture
def fresh_server():
    yield from _serve(E2E_N_CTX)


@pytest.mark.slow
def test_a_real_served_model_answers_like_the_in_process_model(monkeypatch, server):
    from memtrace_opt.lm.embedded import EmbeddedLlama
    from memtrace_opt.lm.embedded_model import embedded_model_id
    from memtrace_opt.lm.factory import build_base

    base, key, _ = server
    monkeypatch.setenv("MEMTRACE_SERVE_KEY", key)
    assert _get(f"{base}/models", None) == 401 and _get(f"{base}/models", "wrong") == 401
    served = build_base(ModelConfig(provider="openai_compatible", model=embedded_model_id("qwen-1.5b"),
                                    api_base=base, api_key_env="MEMTRACE_SERVE_KEY"))
    local = EmbeddedLlama("qwen-1.5b", n_ctx=2048)
    try:
        for question in ("What is the capital of France? One word.", "List three primary colours, comma-separated."):
            messages = [{"role": "user", "content": question}]
            remote, here = served.chat(messages, max_tokens=24), local.chat(messages, max_tokens=24)
            assert remote.text == here.text and remote.text.strip()
            assert remote.completion_tokens == here.completion_tokens
    finally:
        local.close()


E2E_CONFIG = """run_name: e2e
output_dir: {out}
models: {{task: {model}, judge: {model}, reflection: {model}}}
dataset: {{name: mini, conversations: [mini-1, mini-2]}}
split: {{optimize: [mini-1], validation: [], heldout: [mini-2]}}
system: {{name: long_context}}
eval: {{judge: deterministic}}
attribution: {{counterfactual: false}}
optimizer: {{method: attributed, rounds: 1, patience: 0, max_metric_calls: 40, minibatch_size: 3, acceptance: equal}}
"""


@pytest.mark.slow
def test_eval_and_an_optimize_round_through_the_server_match_the_in_process_model(tmp_path, monkeypatch,
                                                                                 fresh_server):
    """The same config through `provider: openai_compatible` (the served model) and `provider: embedded`:
    the same answers, judgements, proposals and final prompts at temperature 0."""
    from memtrace_opt import evaluate, optimize
    from memtrace_opt.lm.embedded_model import embedded_model_id

    base, key, _ = fresh_server
    monkeypatch.setenv("MEMTRACE_SERVE_KEY", key)
    models = {"embedded": f"{{provider: embedded, model: qwen-1.5b, n_ctx: {E2E_N_CTX}}}",
              "served": (f"{{provider: openai_compatible, model: {embedded_model_id('qwen-1.5b')}, "
                         f"api_base: '{base}', api_key_env: MEMTRACE_SERVE_KEY}}")}
    runs = {}
    for name, model in models.items():
        config = tmp_path / f"{name}.yaml"
        config.write_text(E2E_CONFIG.format(out=tmp_path / name, model=model))
        evaluated = evaluate(config)
        state = optimize(config, out=tmp_path / name / "opt", attribute_heldout=False).state
        runs[name] = (evaluated, state, tmp_path / name / "opt")
    (eval_a, state_a, dir_a), (eval_b, state_b, dir_b) = runs["embedded"], runs["served"]
    answers = [(r.qa_id, r.prediction, r.judge_score) for r in eval_a.results]
    assert answers == [(r.qa_id, r.prediction, r.judge_score) for r in eval_b.results] and len(answers) == 12
    assert state_a.best_candidate == state_b.best_candidate
    assert state_a.final["best_accuracy"] == state_b.final["best_accuracy"]
    proposals = [json.loads((d / "rounds" / "round_1" / "optimizer.json").read_text()).get("proposals")
                 for d in (dir_a, dir_b)]
    assert proposals[0] == proposals[1]
    served_usage = json.loads((dir_b / "usage.json").read_text())["ledger"]["by_role"]
    assert served_usage["task"]["calls"] > 0  # the served run did call the server
