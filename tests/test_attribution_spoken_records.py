"""A stored record's speaker is part of what it says: rewriting it distorts the evidence at the op that
wrote it (found in the hard suite on LoCoMo: a record of John's line stored as Maria's, or as "It is
not true that john", was blamed on retrieval because only the rendered context showed the change)."""

from __future__ import annotations

from memtrace_opt.attribution.content import TokenJudge, make_fact, spoken
from memtrace_opt.attribution.failures import collect_cases
from memtrace_opt.bench.inject import Injection, inject_case
from memtrace_opt.attribution.tracing import TracingAttributor
from memtrace_opt.graph import Overrides, replay
from memtrace_opt.systems.runner import rerun_for, run_conversation
from tests.scripted_lm import ScriptedLM, judge_lm, make_conversation

TURNS = [("John", "We made pizza with the whole family last night."), ("Maria", "Nice! I baked a peach cobbler.")]
QA = {"question": "What did John make with his family?", "answer": "pizza", "evidence": ["D1:1"]}
LINE = {"turn_id": "D1:1", "speaker": "John", "text": TURNS[0][1], "date": "1 May 2024"}


def test_a_record_reads_as_its_speakers_line():
    assert spoken([LINE])[0]["text"] == "John: " + TURNS[0][1]
    assert spoken({**LINE, "text": "John: hi"})["text"] == "John: hi"  # already a line: unchanged
    assert spoken("plain text") == "plain text"


def test_a_record_whose_speaker_was_rewritten_no_longer_carries_the_fact():
    fact = make_fact("message:D1:1@1", LINE, QA["question"], QA["answer"], speakers=("John", "Maria"))
    judge = TokenJudge()
    assert judge.holds(fact, [LINE]).holds
    assert not judge.holds(fact, [{**LINE, "speaker": "Maria"}]).holds
    assert not judge.holds(fact, [{**LINE, "speaker": "It is not true that John"}]).holds


def _run(answer: str, qa: dict = QA):
    conv = make_conversation([TURNS], [qa])
    task = ScriptedLM([(r"Question:", lambda messages, match: answer)])
    lms = {"task": task, "judge": judge_lm()}
    return conv, run_conversation("long_context", conv, lms=lms).graph, lms


def test_a_speaker_rewritten_at_the_write_is_blamed_on_the_write_not_on_retrieval():
    conv, graph, lms = _run("A peach cobbler")
    write = next(o for o in graph.ops.values() if o.inputs.get("message") == ("message:D1:1@1",))
    [(role, var)] = write.outputs.items()
    swapped = [{**r, "speaker": "Maria"} if r.get("turn_id") == "D1:1" else r for r in graph.variables[var].value]
    faulty = replay(graph, rerun_for(graph, conv), from_op=write.id,
                    overrides=Overrides(op_outputs={write.id: {role: swapped}}), lms=lms).graph
    [case] = collect_cases(faulty, conv.qa)
    blame = TracingAttributor(evidence="annotated", embed=None).attribute(faulty, case)
    assert (blame.error_type, blame.op_id) == ("ExtractionError", write.id)


def test_an_injected_fault_that_leaves_a_right_answer_is_no_case():
    """The fault (here: none at all) leaves "3 years" for "three years"; the judge rejects it, so the
    failure is the judge's and a label naming the injected op would be false."""
    qa = {"question": "How long has John had his turtles?", "answer": "three years", "evidence": ["D1:1"]}
    conv, graph, lms = _run("3 years", qa)
    [case] = collect_cases(graph, conv.qa)
    write = next(o for o in graph.ops.values() if o.inputs.get("message") == ("message:D1:1@1",))
    [(role, var)] = write.outputs.items()
    same = Overrides(op_outputs={write.id: {role: graph.variables[var].value}})
    outcome = inject_case(graph, case, Injection("UpdateError", write.id, same, "no-op"), rerun_for(graph, conv), lms)
    assert isinstance(outcome, str) and outcome.startswith("still answered correctly by a stricter judgement")
    kept = inject_case(graph, case, Injection("JudgeError", case.judge_op or "", same, "judged wrongly"),
                       rerun_for(graph, conv), lms)
    assert not isinstance(kept, str)
