"""Run directories for report tests: a small traced toy run with blame and loop outputs, and a big synthetic graph.

No tests here; the report tests and ``benchmarks/bench_report.py`` import these builders.
The toy run uses the core toy ops (``tests/toy_system.py``), a deterministic judge, and messages that
try to inject markup, so every report test also exercises escaping.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from memtrace_opt import rundir as rd
from memtrace_opt.eval.results import QAResult, summarize
from memtrace_opt.eval.metrics import bleu1, token_f1
from memtrace_opt.graph import End, MemoryGraph, New, Next, Tracer
from memtrace_opt.graph.model import (
    ANSWER, EXTRACTION, JUDGE, JUDGEMENT, MEMORY_UNIT, MESSAGE, QA, QUERY, RETRIEVAL, RETRIEVED, UPDATE, Operation,
    PromptRef, SessionRecord, Variable,
)
from memtrace_opt.loop.artifacts import write_prompts
from memtrace_opt.rundir import round_dir, write_json
from memtrace_opt.loop.checkpoint import LoopState, RoundRecord, save_state
from memtrace_opt.systems.judge_op import judge_answer
from memtrace_opt.graph.usage import graph_stats
from tests.toy_system import PROMPTS, PromptEchoLM

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
CONV = "conv-1"
SESSIONS = [
    ["alice likes tea", "bob lives in paris", f"mallory says {SCRIPT}"],
    ["alice likes coffee now", "bob moved to rome", f"mallory wrote {IMG}"],
]
QUESTIONS = [  # (question, gold)
    ("what does alice like now", "coffee"),
    ("where does bob live", "rome"),
    ("what did alice like first", "tea"),
    ("what did mallory say", "hello"),
]
FAILED = [f"{CONV}/q1", f"{CONV}/q2", f"{CONV}/q3"]
SEED_QA = "Answer briefly.\nUse the memories.\nSay 'unknown' if unsure."
NEW_QA = f"Answer briefly.\nUse the newest memories first.\nSay 'unknown' if unsure.\nNever echo {SCRIPT}."


def record_toy_graph() -> MemoryGraph:
    """The toy system over two sessions (an update, a deletion of bob's unit), four judged questions."""
    meta = {"prompts": PROMPTS, "system": "toy", "conversation_id": CONV, "run_id": "toy-run"}
    tracer = Tracer(MemoryGraph(meta), lm=PromptEchoLM(), prompts=PROMPTS)
    units: dict[int, Variable] = {}
    for s, messages in enumerate(SESSIONS, start=1):
        with tracer.session(f"ingest:s{s}", kind="ingest"):
            for t, text in enumerate(messages, start=1):
                msg = tracer.variable(f"message:D{s}:{t}", text, category=MESSAGE)
                fact = tracer.call("toy.extract", inputs={"message": msg},
                                   outputs={"fact": New(f"fact:D{s}:{t}", "facts")})["fact"]
                out = Next(units[t]) if t in units else New(f"mem:{t}", MEMORY_UNIT)
                units[t] = tracer.call("toy.store", inputs={"fact": fact}, outputs={"unit": out})["unit"]
                if "rome" in text:
                    units[t] = tracer.call("toy.delete", inputs={}, outputs={"unit": End(units[t])})["unit"]
    for q, (question, gold) in enumerate(QUESTIONS):
        qa = SimpleNamespace(id=f"{CONV}/q{q}", question=question, answer=gold)
        with tracer.session(f"answer:{qa.id}", kind="answer", qa_id=qa.id):
            qv = tracer.variable(f"question:{qa.id}", question, category=QUERY)
            live = [u for u in units.values() if u.value is not None]
            ctx = tracer.call("toy.retrieve", inputs={"query": qv, "units": live}, params={"top_k": 3},
                              outputs={"context": New(f"retrieved:{qa.id}", RETRIEVED)})["context"]
            ans = tracer.call("toy.answer", inputs={"question": qv, "context": ctx},
                              outputs={"answer": New(f"answer:{qa.id}", ANSWER)})["answer"]
        judge_answer(tracer, qa, qv, ans, judge="deterministic", gold=gold)
    return tracer.graph


def blame_records() -> list[dict]:
    """Hand-made blame for the three failures: a deletion, an update, and a response error with markup in it."""
    base = {"cost": {"llm_calls": 3, "prompt_tokens": 900, "completion_tokens": 120, "seconds": 4.5, "replays": 1}}
    return [
        {**base, "case_id": f"{CONV}/q1", "question": "where does bob live", "gold": "rome", "prediction": "?",
         "error_type": "DeletionError", "op_id": "ingest:s2/toy.delete#0", "prompt_component": None,
         "reason": "The unit holding 'bob moved to rome' was deleted right after it was stored.",
         "evidence": ["D2:2"], "confidence": 0.9, "counterfactual_rescued": True},
        {**base, "case_id": f"{CONV}/q2", "question": "what did alice like first", "gold": "tea", "prediction": "?",
         "error_type": "UpdateError", "op_id": "ingest:s2/toy.store#0", "prompt_component": "extract",
         "reason": "The update overwrote 'likes tea' with 'likes coffee' instead of keeping both.",
         "evidence": ["D1:1"], "confidence": 0.8, "counterfactual_rescued": False},
        {**base, "case_id": f"{CONV}/q3", "question": "what did mallory say", "gold": "hello", "prediction": IMG,
         "error_type": "ResponseError", "op_id": f"answer:{CONV}/q3/toy.answer#0", "prompt_component": "answer",
         "reason": f"The answer echoed the raw message {IMG} {SCRIPT} instead of answering.",
         "evidence": ["D1:3"], "confidence": 0.6},
    ]


def build_toy_run(root: Path) -> Path:
    """A complete run directory: config, graph, results, summary, usage, blame, rounds and prompt rewrites."""
    graph = record_toy_graph()
    root.mkdir(parents=True, exist_ok=True)
    (root / rd.CONFIG_FILE).write_text(
        "run_name: toy-report\nsystem: {name: toy}\ndataset: {name: mini, max_sessions: 2}\n"
        "models:\n  task: {provider: embedded, model: qwen-1.5b}\n  judge: {provider: embedded, model: qwen-0.5b}\n"
        "eval: {judge: deterministic}\noptimizer: {method: attributed, rounds: 2}\n", encoding="utf-8")
    rd.write_graph(root, CONV, graph)
    results = []
    for q, (question, gold) in enumerate(QUESTIONS):
        qa_id = f"{CONV}/q{q}"
        pred = str(graph.value(graph.latest_id(f"answer:{qa_id}")))
        verdict = graph.value(graph.latest_id(f"judgement:{qa_id}"))
        results.append(QAResult(qa_id, CONV, "single-hop" if q % 2 == 0 else "knowledge-update", question, gold, pred,
                                verdict["score"], token_f1(pred, gold), bleu1(pred, gold),
                                judge_label=verdict["label"], judge_reason=verdict["reason"]))
    stats = {CONV: graph_stats(graph)}
    rd.write_results(root, results, stats)
    usage = {"lm_calls": 8, "cached_calls": 0, "prompt_tokens": 24, "completion_tokens": 16, "latency_s": 1.5}
    rd.write_summary(root, {"run_id": "toy-run", "system": "toy", "dataset": "mini", "judge": "deterministic",
                            "conversations": [CONV], **summarize(results, n_boot=200), "lm_usage": usage,
                            "wall_s": 12.5})
    rd.write_usage(root, {"graphs": usage, "by_op": stats[CONV]["by_op"]})
    rd.write_json(root / "blame.json", {"signals": blame_records(), "aggregate": {"answer": 1, "extract": 1}})
    write_loop_outputs(root)
    rd.write_json(root / "attribution_bench.json", bench_payload())
    return root


def write_loop_outputs(root: Path) -> None:
    """What ``optimize`` leaves: a checkpoint (baseline + two rounds), round folders, final prompts with diffs."""
    seed = {"extract": PROMPTS["extract"], "answer": SEED_QA}
    best = {"extract": PROMPTS["extract"], "answer": NEW_QA}
    plan = {"method": "attributed", "rounds": 2}
    records = [RoundRecord(k, [CONV], 3, 4, {"answer": 1}, 1, ["answer"], acc, True, best, {}) for k, acc in
               ((1, 0.5), (2, 0.75))]
    state = LoopState(plan, "toy", {}, seed, best, best_val=0.75, best_round=2, baseline_val=0.25, rounds=records,
                      stop_reason="all 2 rounds done", status="done")
    save_state(root, state)
    for k in (0, 1, 2):
        write_json(round_dir(root, k) / "scores.json", {"validation": {"a": 1.0, "b": k / 2}})
    signals = {s["case_id"]: s for s in blame_records()[:2]}
    write_json(round_dir(root, 1) / "blame.json", {"failures": 2, "signals": signals})
    write_prompts(root / "prompts", best, seed)
    write_json(root / "final.json", {"method": "attributed", "system": "toy", "n": 4, "seed_accuracy": 0.25,
                                     "best_accuracy": 0.5, "best_round": 2, "stop_reason": "all 2 rounds done"})


def bench_payload() -> dict:
    """A ``bench-attribution`` payload: one row per method with per-system and per-type breakdowns."""
    def scores(t: float, o: float) -> dict:
        return {"n": 10, "type_accuracy": t, "op_accuracy": o, "tokens_per_case": 5000.0}

    rows = [{"method": m, **scores(t, o), "by_system": {"rag": scores(t, o), "mem0": scores(t - 0.1, o - 0.2)},
             "by_type": {"RetrievalError": scores(t, o), "UpdateError": scores(t - 0.2, o)}}
            for m, t, o in (("tracing", 0.8, 0.6), ("flat_log", 0.6, 0.4))]
    return {"rows": rows, "cases": 20, "case_counts": {"rag": {"RetrievalError": 6, "ResponseError": 4},
                                                       "mem0": {"UpdateError": 7, "ExtractionError": 3}}}


def synthetic_graph(n_messages: int, n_questions: int, *, versions: int = 4) -> MemoryGraph:
    """A big graph built record by record (no LM): extraction and update per message, units with many
    versions, and retrievals that read every live unit, so each question's slice is nearly the whole graph."""
    g = MemoryGraph({"system": "synthetic", "conversation_id": "big"})
    clock = iter(range(1, 10**9))
    n_units = max(1, n_messages // versions)
    latest: dict[int, str] = {}
    g.add_session(SessionRecord("ingest:s1", "ingest", next(clock)))
    for i in range(n_messages):
        msg = Variable(f"message:D1:{i}", 1, MESSAGE, {"speaker": "A", "text": f"fact number {i} <b>bold</b>"},
                       next(clock), "ingest:s1")
        fact = Variable(f"fact:{i}", 1, "facts", f"fact {i}", next(clock) + 1, "ingest:s1")
        g.add_variable(msg)
        g.add_variable(fact)
        g.add_operation(Operation(f"ingest:s1/x.extract#{i}", "x.extract", EXTRACTION, {"message": (msg.id,)},
                                  {"fact": fact.id}, next(clock), "ingest:s1", prompt=PromptRef("extract", "0" * 12)))
        u = i % n_units
        prev = latest.get(u)
        unit = Variable(f"mem:{u}", 1 if prev is None else int(prev.rsplit("@", 1)[1]) + 1, MEMORY_UNIT,
                        f"unit {u} after fact {i}", next(clock) + 1, "ingest:s1")
        g.add_variable(unit)
        inputs = {"fact": (fact.id,), **({"_previous": (prev,)} if prev else {})}
        g.add_operation(Operation(f"ingest:s1/x.update#{i}", "x.update", UPDATE, inputs, {"unit": unit.id},
                                  next(clock), "ingest:s1", prompt=PromptRef("update", "1" * 12)))
        latest[u] = unit.id
    for q in range(n_questions):
        sid = f"answer:big/q{q}"
        g.add_session(SessionRecord(sid, "answer", next(clock), {"qa_id": f"big/q{q}"}))
        names = [f"{kind}:big/q{q}" for kind in ("question", "retrieved", "answer", "gold", "judgement")]
        cats = [QUERY, RETRIEVED, ANSWER, "gold-answer", JUDGEMENT]
        values = [f"question {q}?", [{"text": f"unit {q}"}], "wrong", "right", {"score": 0, "label": "WRONG"}]
        vs = [Variable(n, 1, c, v, next(clock), sid) for n, c, v in zip(names, cats, values)]
        g.add_variable(vs[0])
        g.add_variable(vs[1])
        g.add_operation(Operation(f"{sid}/x.retrieve#0", "x.retrieve", RETRIEVAL,
                                  {"query": (vs[0].id,), "units": tuple(latest.values())}, {"context": vs[1].id},
                                  next(clock), sid))
        g.add_variable(vs[2])
        g.add_operation(Operation(f"{sid}/x.answer#0", "x.answer", QA,
                                  {"question": (vs[0].id,), "context": (vs[1].id,)}, {"answer": vs[2].id},
                                  next(clock), sid, prompt=PromptRef("qa", "2" * 12)))
        g.add_variable(vs[3])
        g.add_variable(vs[4])
        g.add_operation(Operation(f"{sid}/eval.judge#0", "eval.judge", JUDGE,
                                  {"gold": (vs[3].id,), "answer": (vs[2].id,)}, {"judgement": vs[4].id},
                                  next(clock), sid))
    return g


def build_synthetic_run(root: Path, n_messages: int = 5000, n_questions: int = 40) -> Path:
    """A run directory around :func:`synthetic_graph`: every question failed and blamed on an update op."""
    g = synthetic_graph(n_messages, n_questions)
    rd.write_graph(root, "big", g)
    results = [QAResult(f"big/q{q}", "big", "multi-hop", f"question {q}?", "right", "wrong", 0, 0.0, 0.0)
               for q in range(n_questions)]
    rd.write_results(root, results, ["big"])
    blame = [{"case_id": f"big/big/q{q}", "question": f"question {q}?", "gold": "right", "prediction": "wrong",
              "error_type": "UpdateError", "op_id": f"ingest:s1/x.update#{q * 7}", "prompt_component": "update",
              "reason": "overwrote it", "evidence": [f"D1:{q * 7}"]} for q in range(n_questions)]
    (root / "blame.json").write_text(json.dumps(blame), encoding="utf-8")
    return root
