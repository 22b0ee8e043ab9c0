"""The executor section, and Ray evaluation against a served model: the same results, graphs and order as local.

The slow tests start a local Ray cluster (20-40 s on two cores) and a loopback stub of an
OpenAI-compatible server that answers deterministically from the request, so a local run and a Ray
run of the same config must write identical results; the key lives only in the environment.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memtrace_opt import rundir as rd
from memtrace_opt.config import ExecutorConfig, RunConfig, load_config
from memtrace_opt.errors import ConfigError, LMError

KEY_VAR = "MEMTRACE_RAY_TEST_KEY"


def write_config(tmp_path, name, executor, port=1):
    """``tmp_path/name/run.yaml``: long_context on the mini dataset against the stub; run dir ``name/out/r``
    (one run name for all, so the runs differ only by executor)."""
    task = (f"{{provider: openai_compatible, model: stub, api_base: 'http://127.0.0.1:{port}/v1', "
            f"api_key_env: {KEY_VAR}}}")
    (tmp_path / name).mkdir(exist_ok=True)
    path = tmp_path / name / "run.yaml"
    path.write_text(f"run_name: r\noutput_dir: out\nmodels:\n  task: {task}\ndataset: {{name: mini, conversations: [mini-1, mini-2]}}\n"
                    f"system: {{name: long_context}}\neval: {{judge: deterministic}}\nexecutor: {executor}\n")
    return path


# -- the config section (fast) -------------------------------------------------------------------
def test_executor_defaults_to_one_local_worker():
    assert ExecutorConfig().model_dump() == {"kind": "local", "address": None, "workers": 1}
    assert RunConfig(run_name="r", system={"name": "long_context"}).executor == ExecutorConfig()


@pytest.mark.parametrize("models", ["  task: {provider: embedded}\n",
                                    "  task: {provider: openai_compatible, model: m, api_base: 'http://x/v1'}\n"
                                    "  judge: {provider: embedded}\n"])
def test_ray_with_an_embedded_model_is_refused_at_executor_kind(tmp_path, models):
    path = tmp_path / "c.yaml"
    path.write_text(f"run_name: r\nmodels:\n{models}system: {{name: long_context}}\nexecutor: {{kind: ray}}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field == "executor.kind" and "served model" in info.value.message
    assert "\n" not in str(info.value)


def test_ray_with_served_models_and_address_only_for_ray(tmp_path):
    cfg = load_config(write_config(tmp_path, "ok", "{kind: ray, address: auto, workers: 2}"))
    assert cfg.executor == ExecutorConfig(kind="ray", address="auto", workers=2)
    with pytest.raises(ConfigError, match="address only applies to kind ray") as info:
        load_config(write_config(tmp_path, "bad", "{kind: local, address: auto}"))
    assert info.value.field == "executor"


def test_a_saved_config_with_eval_workers_loads_as_executor_workers(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("run_name: r\nsystem: {name: long_context}\neval: {judge: deterministic, workers: 3}\n")
    cfg = load_config(path)
    assert cfg.executor.workers == 3 and cfg.eval.judge == "deterministic"
    assert "workers" not in cfg.model_dump()["eval"]


def test_ray_refuses_lms_injected_into_this_process(tmp_path):
    from memtrace_opt.run import evaluate

    with pytest.raises(ConfigError, match="injected") as info:
        evaluate(write_config(tmp_path, "inj", "{kind: ray}"), lms={"task": object()})
    assert info.value.field == "executor.kind"


# -- Ray against a served stub (slow) -------------------------------------------------------------
class Stub(ThreadingHTTPServer):
    """An OpenAI chat-completions server whose answer is a function of the request alone: a word of the
    question and a hash of all messages (so any difference in what a worker sent shows in the results).
    A request containing ``fail_on`` gets a 401 (not retried: the run fails at once)."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), StubHandler)
        self.requests, self.fail_on, self.lock = 0, None, threading.Lock()


class StubHandler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        server = self.server
        with server.lock:
            server.requests += 1
        text = json.dumps(request["messages"], sort_keys=True)
        if server.fail_on and server.fail_on in text:
            status, body = 401, {"error": {"message": "no"}}
        else:
            question = request["messages"][-1]["content"].rpartition("Question:")[2]
            words = re.findall(r"[A-Z][a-z]+", question)[1:] or question.split()[-1:] or ["none"]
            answer = f"{words[0]} {hashlib.sha256(text.encode()).hexdigest()[:8]}"
            status, body = 200, {
                "id": "c1", "object": "chat.completion", "created": 0, "model": "stub",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": 2, "total_tokens": len(text) // 4 + 2}}
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def served(monkeypatch):
    """The stub server, the key in the environment (before Ray starts, so its workers inherit it), and a
    two-CPU local Ray cluster shut down afterwards."""
    ray = pytest.importorskip("ray")
    monkeypatch.setenv(KEY_VAR, "stub-secret-key")
    server = Stub()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield server
    finally:
        ray.shutdown()
        server.shutdown()


def no_local_conversations(monkeypatch):
    """Make the driver unable to run a conversation itself: a Ray run must not fall back to it (the
    workers import the real module in their own processes)."""
    from memtrace_opt.systems import evaluate

    def refuse(*args, **kwargs):
        raise AssertionError("a conversation ran in the driver process")

    monkeypatch.setattr(evaluate, "run_conversation", refuse)


@pytest.mark.slow
def test_ray_writes_the_local_results_graphs_and_order(tmp_path, monkeypatch, served):
    from memtrace_opt.run import evaluate

    port = served.server_address[1]
    local = evaluate(write_config(tmp_path, "local", "{kind: local}", port), progress=False)
    calls = served.requests
    with monkeypatch.context() as patch:
        no_local_conversations(patch)
        remote = evaluate(write_config(tmp_path, "ray", "{kind: ray, workers: 2}", port), progress=False)
    assert served.requests == 2 * calls > 0  # separate run dirs, separate caches: the workers called the stub

    saved = [json.loads((d / "results.json").read_text()) for d in (local.run_dir, remote.run_dir)]
    assert saved[0]["conversations"] == saved[1]["conversations"] == ["mini-1", "mini-2"]
    assert saved[0]["results"] == saved[1]["results"] and len(saved[0]["results"]) == 12
    assert [r.to_dict() for r in local.results] == [r.to_dict() for r in remote.results]
    for conv in ("mini-1", "mini-2"):
        a, b = rd.read_graph(local.run_dir, conv), rd.read_graph(remote.run_dir, conv)
        assert a.fingerprint() == b.fingerprint() and list(a.ops) == list(b.ops)
    # the workers' LM usage reached the driver's ledger
    ledgers = [json.loads((d / "usage.json").read_text())["ledger"] for d in (local.run_dir, remote.run_dir)]
    assert ledgers[0]["by_role"]["task"]["calls"] == ledgers[1]["by_role"]["task"]["calls"] == calls
    # only the variable's name is written down
    for path in remote.run_dir.rglob("*"):
        if path.is_file():
            assert b"stub-secret-key" not in path.read_bytes(), path


@pytest.mark.slow
def test_a_failed_ray_task_is_raised_and_resume_runs_only_the_rest(tmp_path, served):
    from memtrace_opt.run import evaluate

    config = write_config(tmp_path, "fails", "{kind: ray, workers: 1}", served.server_address[1])
    served.fail_on = "Lena"  # mini-2's speaker: that conversation's first answer gets a 401
    with pytest.raises(LMError, match="401"):
        evaluate(config, progress=False)
    run_dir = tmp_path / "fails" / "out" / "r"
    assert rd.done_conversations(run_dir) == ["mini-1"]

    served.fail_on, before = None, served.requests
    again = evaluate(config, progress=False)
    assert again.resumed == ["mini-1"] and rd.done_conversations(run_dir) == ["mini-1", "mini-2"]
    assert served.requests - before == 6  # mini-2's six questions; nothing of mini-1 was redone
    assert len(again.results) == 12


OPTIMIZE = """run_name: r
output_dir: out
models: {{task: {model}, judge: {model}, reflection: {model}}}
dataset: {{name: mini, conversations: [mini-1, mini-2]}}
split: {{optimize: [mini-1], validation: [], heldout: [mini-2]}}
system: {{name: long_context}}
eval: {{judge: deterministic}}
executor: {executor}
optimizer: {{method: unattributed, rounds: 1, patience: 0, max_metric_calls: 30, minibatch_size: 3}}
"""


@pytest.mark.slow
def test_an_optimize_run_through_ray_writes_what_a_local_one_writes(tmp_path, monkeypatch, served):
    """Candidate evaluations and the held-out final as Ray tasks: the same rounds, prompts and held-out
    scores as the local thread pool, and no conversation run in the driver."""
    from memtrace_opt.run import optimize

    model = (f"{{provider: openai_compatible, model: stub, api_base: 'http://127.0.0.1:{served.server_address[1]}/v1',"
             f" api_key_env: {KEY_VAR}}}")
    finals = {}
    for name, executor in (("local", "{kind: local, workers: 2}"), ("ray", "{kind: ray, workers: 2}")):
        (tmp_path / name).mkdir()
        config = tmp_path / name / "run.yaml"
        config.write_text(OPTIMIZE.format(model=model, executor=executor))
        before = served.requests
        with monkeypatch.context() as patch:
            if name == "ray":
                no_local_conversations(patch)
            done = optimize(config, attribute_heldout=False)
            state, run_dir = done.state, done.run_dir
        assert served.requests > before  # each run has its own cache: it asked the server
        final = json.loads((run_dir / "final.json").read_text())
        finals[name] = (state.best_candidate, state.baseline_val, final["cases"], [r.val_score for r in state.rounds])
    assert finals["local"] == finals["ray"] and len(finals["ray"][2]) == 6
