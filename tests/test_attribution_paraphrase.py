"""Tracing's token test on paraphrases: what an LM extractor writes is a third-person rewrite of a turn.

Mem0's extraction drops a turn's small talk ("thanks for asking", "it can be a pain") and keeps what
was said, often in the question's own words. The strict judge tracing walks with must still see the
fact in such a rewrite, or it blames the extraction for a loss that never happened; and it must still
refuse a different turn that merely shares one answer word and the question's topic.
"""

from __future__ import annotations

from memtrace_opt.attribution.content import TokenJudge, make_fact, related

STRICT = TokenJudge(miss_below=TokenJudge.hold_at)  # tracing's default judge: no grey zone
SPEAKERS = ("Ravi", "Lena")


def test_a_rewrite_that_keeps_every_answer_word_and_the_question_topic_holds_the_fact() -> None:
    turn = {"speaker": "Ravi", "turn_id": "D2:3",
            "text": "Hi Lena, kind of you to ask! Honestly wonderful - sea breeze, quiet evenings and a small "
                    "wooden hut beside the dunes made it feel like a proper escape."}
    fact = make_fact("message:D2:3@1", turn, "What did Ravi enjoy about his camping holiday in Skagen?",
                     "sea breeze, quiet evenings, small wooden hut beside the dunes", speakers=SPEAKERS)
    rewrite = "The camping holiday was great, with sea breeze, quiet evenings and a small wooden hut beside the dunes"
    assert STRICT.holds(fact, [rewrite]).holds is True
    # the same answer words with nothing of the question or the turn around them stay doubtful
    assert STRICT.holds(fact, ["breeze"]).holds is False


def test_one_common_answer_word_and_the_question_topic_do_not_make_another_turn_carry_the_fact() -> None:
    turn = {"speaker": "Ravi", "turn_id": "D1:15", "text": "I'll be in Norway for a few weeks, then on to Oslo!"}
    fact = make_fact("message:D1:15@1", turn, "How long did Ravi plan to stay in Norway?", "A few weeks",
                     speakers=SPEAKERS)
    other_turn = "Ravi: I'm heading there in two weeks. I'll be staying somewhere lovely."
    assert STRICT.holds(fact, [other_turn]).holds is False
    assert STRICT.holds(fact, ["Ravi will spend a few weeks in Norway"]).holds is True


def test_a_question_word_the_stemmer_splits_still_marks_what_the_question_asks_about() -> None:
    turn = {"speaker": "Lena", "turn_id": "D2:23",
            "text": "I'm allergic to cats and most birds. It can be a bit of a pain, but I cope in other ways."}
    rewrite = ["Lena mentioned that she is allergic to cats and most birds."]
    about = make_fact("message:D2:23@1", turn, "What condition might Lena have given her allergies?", "hay fever",
                      speakers=SPEAKERS)
    assert STRICT.holds(about, rewrite).holds is True
    # the rewrite holds because the question asks about its words, not because it shares any four of them
    unrelated = make_fact("message:D2:23@1", turn, "What condition might Lena have given her diet?", "hay fever",
                          speakers=SPEAKERS)
    assert STRICT.holds(unrelated, rewrite).holds is False


def test_related_joins_a_words_forms_but_not_short_or_different_words() -> None:
    assert related("allerg", frozenset({"allergi"}))  # allergic / allergies
    assert related("marri", frozenset({"marriag"}))  # married / marriage
    assert not related("car", frozenset({"carpet"}))  # too short to say
    assert not related("garden", frozenset({"guitar", "month"}))
