"""A scripted Mem0-like system for attribution tests, and checks that it behaves as the tests assume.

extract (LM, prompt "extract") → per fact a decision (LM, prompt "update": ADD / UPDATE-merge / DELETE by
topic) → write (New/Next unit, no prompt) or delete (End, no prompt) → retrieve (token overlap, no prompt)
→ qa.answer (shared op, scripted LM) → judge (scripted judge LM). Every reply is computed from the
prompt, so replays with overrides re-execute exactly what changed, offline and deterministically.
"""

from __future__ import annotations

import json

from memtrace_opt.attribution.text import content_tokens
from memtrace_opt.graph import End, MemoryGraph, New, Next, OpFailure, Tracer, operation
from memtrace_opt.graph.model import ANSWER, GOLD, JUDGEMENT, MEMORY_UNIT, MESSAGE, QUERY, RETRIEVED
from memtrace_opt.lm.base import LMResult
from memtrace_opt.systems.qa import answer_question  # noqa: F401  (registers qa.answer)

PROMPTS = {
    "extract": "EXTRACT the facts of the message.",
    "update": "DECIDE how memory changes.",
    "question_answering": "ANSWER from the memories.",
}
SPEAKERS = ("Priya", "Tom")
DATES = ("1 May 2024", "8 May 2024", "15 May 2024")
CONV = [
    [("Priya", "pet: I adopted a grey tabby cat called Biscuit."),
     ("Tom", "home: I live in Leeds near the canal."),
     ("Tom", "hobby: I started learning the guitar.")],
    [("Tom", "home: I found a flat by the river."),
     ("Priya", "work: My job is nurse at St Mary hospital.")],
    [("Priya", "class: I joined a pottery class on Mondays."),
     ("Priya", "class: DELETE I quit that class.")],
]
QAS = [
    {"id": "q0", "question": "What is the name of Priya's cat?", "answer": "Biscuit", "evidence": ["D1:1"]},
    {"id": "q1", "question": "Where does Tom live?", "answer": "Leeds", "evidence": ["D1:2"]},
    {"id": "q2", "question": "What instrument is Tom learning?", "answer": "guitar", "evidence": ["D1:3"]},
    {"id": "q3", "question": "What is Priya's job?", "answer": "nurse", "evidence": ["D2:2"]},
    {"id": "q4", "question": "Which class did Priya join on Mondays?", "answer": "pottery", "evidence": ["D3:1"]},
]


def _overlap(a: str, b: str) -> int:
    return len(content_tokens(a) & content_tokens(b))


def _reply(system: str, user: str) -> str:
    tag = system.split()[0]
    if tag == "EXTRACT":
        msg = json.loads(user)
        topic, _, statement = msg["text"].partition(": ")
        return json.dumps({"facts": [{"text": f"{msg['speaker']}: {statement}", "topic": f"{msg['speaker']}:{topic}"}]})
    if tag == "DECIDE":
        req = json.loads(user)
        fact, memories = req["fact"], req["memories"]
        same = [m for m in memories if m["topic"] == fact["topic"]]
        if not same:
            return json.dumps({"event": "ADD", "target": None, "text": fact["text"], "topic": fact["topic"]})
        if "DELETE" in fact["text"]:
            return json.dumps({"event": "DELETE", "target": same[0]["name"], "text": same[0]["text"], "topic": fact["topic"]})
        merged = f"{same[0]['text']}; {fact['text'].split(': ', 1)[1]}"
        return json.dumps({"event": "UPDATE", "target": same[0]["name"], "text": merged, "topic": fact["topic"]})
    if tag == "ANSWER":
        question = user.split("Question: ", 1)[1].split("\n")[0]
        lines = [ln.split("] ", 1)[1] for ln in user.splitlines() if ln.startswith("- [")]
        best = max(lines, key=lambda ln: _overlap(ln, question), default="")
        return best if best and _overlap(best, question) else "Not mentioned"
    if tag == "JUDGE":
        req = json.loads(user)
        ok = content_tokens(req["gold"]) <= content_tokens(req["prediction"])
        return json.dumps({"label": "CORRECT" if ok else "WRONG"})
    raise AssertionError(f"unscripted prompt {system!r}")


class ScriptLM:
    """Computes each reply from the prompt (see ``_reply``); counts calls."""

    model_id = "scripted/tt"

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages, **kw):
        self.calls += 1
        text = _reply(messages[0]["content"], messages[-1]["content"])
        return LMResult(text=text, model=self.model_id, prompt_tokens=10, completion_tokens=5)


@operation("tt.extract", category="extraction", prompt="extract")
def _extract(ctx, inputs, params):
    reply = ctx.chat([{"role": "system", "content": ctx.prompt}, {"role": "user", "content": json.dumps(inputs["message"])}])
    try:
        return {"facts": json.loads(reply.text)["facts"]}
    except (ValueError, KeyError):
        raise OpFailure("unparsable facts", fallback={"facts": []}, raw=reply.text) from None


@operation("tt.decide", category="update", prompt="update")
def _decide(ctx, inputs, params):
    fact = inputs["facts"][params["index"]]
    memories = [{**m, "name": n} for m, n in zip(inputs["memories"], params["names"])]
    reply = ctx.chat([{"role": "system", "content": ctx.prompt},
                      {"role": "user", "content": json.dumps({"fact": fact, "memories": memories})}])
    return {"event": json.loads(reply.text)}


@operation("tt.write", category="update", memoize=False)
def _write(ctx, inputs, params):
    event = inputs["event"]
    return {"unit": {"text": event["text"], "topic": event["topic"], "date": params["date"]}}


@operation("tt.delete", category="deletion", memoize=False)
def _delete(ctx, inputs, params):
    return {"unit": None}


@operation("tt.retrieve", category="retrieval")
def _retrieve(ctx, inputs, params):
    ranked = sorted(inputs["units"], key=lambda u: -_overlap(u["text"], inputs["query"]))
    return {"context": [{"text": u["text"], "date": u["date"]} for u in ranked[: params["top_k"]] if _overlap(u["text"], inputs["query"])]}


@operation("tt.judge", category="llm-judge")
def _judge(ctx, inputs, params):
    reply = ctx.chat([{"role": "system", "content": "JUDGE the answer."},
                      {"role": "user", "content": json.dumps({"gold": inputs["gold"]["answer"], "prediction": inputs["answer"]})}],
                     role="judge")
    label = json.loads(reply.text)["label"]
    return {"judgement": {"score": int(label == "CORRECT"), "label": label, "reason": ""}}


def run_tt(tracer: Tracer, conv=CONV, qas=QAS, *, top_k: int = 2) -> None:
    """Ingest ``conv`` and answer ``qas`` (the system's driver, also used for replay)."""
    units: dict[str, object] = {}
    for s, session in enumerate(conv, start=1):
        with tracer.session(f"ingest:s{s}", kind="ingest", date=DATES[s - 1]):
            for t, (speaker, text) in enumerate(session, start=1):
                value = {"turn_id": f"D{s}:{t}", "speaker": speaker, "text": text, "date": DATES[s - 1]}
                msg = tracer.variable(f"message:D{s}:{t}", value, category=MESSAGE)
                facts = tracer.call("tt.extract", inputs={"message": msg},
                                    outputs={"facts": New(f"facts:D{s}:{t}", "intermediate")})["facts"]
                for i in range(len(facts.value)):
                    _apply(tracer, units, facts, i, DATES[s - 1], f"D{s}:{t}:{i}")
    for qa in qas:
        _answer(tracer, units, qa, top_k)


def _apply(tracer, units, facts, i, date, tag):
    live = [u for u in units.values() if not u.deleted]
    event = tracer.call("tt.decide", inputs={"facts": facts, "memories": live},
                        params={"index": i, "names": [u.name for u in live]},
                        outputs={"event": New(f"event:{tag}", "intermediate")})["event"]
    kind, target = event.value["event"], event.value.get("target")
    if kind == "ADD":
        name = f"mem:{len(units) + 1}"
        units[name] = tracer.call("tt.write", inputs={"event": event}, params={"date": date},
                                  outputs={"unit": New(name, MEMORY_UNIT)})["unit"]
    elif kind == "UPDATE" and target in units:
        units[target] = tracer.call("tt.write", inputs={"event": event}, params={"date": date},
                                    outputs={"unit": Next(units[target])})["unit"]
    elif kind == "DELETE" and target in units:
        units[target] = tracer.call("tt.delete", inputs={"event": event}, outputs={"unit": End(units[target])})["unit"]


def _answer(tracer, units, qa, top_k):
    with tracer.session(f"answer:{qa['id']}", kind="answer", qa_id=qa["id"]):
        question = tracer.variable(f"question:{qa['id']}", qa["question"], category=QUERY)
        gold = tracer.variable(f"gold:{qa['id']}", {"answer": qa["answer"], "evidence": qa["evidence"],
                                                    "flags": qa.get("flags", [])}, category=GOLD)
        live = [u for u in units.values() if not u.deleted and u.value]
        context = tracer.call("tt.retrieve", inputs={"query": question, "units": live}, params={"top_k": top_k},
                              outputs={"context": New(f"retrieved:{qa['id']}", RETRIEVED)})["context"]
        answer = tracer.call("qa.answer", inputs={"question": question, "context": context}, params={"question_date": None},
                             outputs={"answer": New(f"answer:{qa['id']}", ANSWER)})["answer"]
        tracer.call("tt.judge", inputs={"answer": answer, "gold": gold},
                    outputs={"judgement": New(f"judgement:{qa['id']}", JUDGEMENT)})


def record_tt(conv=CONV, qas=QAS, **kw) -> tuple[MemoryGraph, dict]:
    """Record a run; returns the graph and the LMs (task and judge)."""
    lms = {"task": ScriptLM(), "judge": ScriptLM()}
    tracer = Tracer(MemoryGraph({"prompts": PROMPTS, "system": "mem0", "conversation": "c1", "speakers": list(SPEAKERS)}),
                    lms=lms, prompts=PROMPTS)
    run_tt(tracer, conv, qas, **kw)
    return tracer.graph, lms


def rerun_tt(conv=CONV, qas=QAS, **kw):
    return lambda tracer: run_tt(tracer, conv, qas, **kw)


# -- the system behaves as the attribution tests assume ---------------------------------------------

def test_baseline_run_answers_all_but_the_deleted_fact():
    graph, _ = record_tt()
    scores = {q["id"]: graph.value(f"judgement:{q['id']}@1")["score"] for q in QAS}
    assert scores == {"q0": 1, "q1": 1, "q2": 1, "q3": 1, "q4": 0}


def test_update_merges_and_delete_tombstones():
    graph, _ = record_tt()
    home = [v for v in graph.variables.values() if v.category == MEMORY_UNIT and "Leeds" in str(v.value)]
    assert {v.version for v in home} == {1, 2} and "river" in home[-1].value["text"]
    assert any(v.deleted for v in graph.variables.values() if v.category == MEMORY_UNIT)
