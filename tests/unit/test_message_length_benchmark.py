"""benchmarks/message_length.py: how it builds its long messages and how it counts, by message length, what the
graph's `status` and `evidence` say."""

from __future__ import annotations

from typing import Any

from tests.support.benchmarks import load_benchmark

bench = load_benchmark("message_length")
SITUATION = "My father died last month and I was his carer for ten years before that happened to us."


def _turn(query: str, *said: str, answerable: bool = True) -> dict[str, Any]:
    history = [m for text in said for m in ({"role": "user", "content": text}, {"role": "assistant", "content": "ok"})]
    return {"id": query, "query": query, "history": history, "answerable": answerable}


def test_a_long_message_is_the_users_earlier_turns_then_the_turn_from_25_words() -> None:
    turns = [_turn("Can I get survivor benefits for that?", SITUATION), _turn("And then?", "Hi."),
             _turn("What about me?")]
    (long,) = bench.long_messages(turns)
    assert long["query"] == f"{SITUATION}\n\nCan I get survivor benefits for that?" and long["history"] == []
    assert len(long["query"].split()) >= 25


def test_each_unanswerable_question_follows_a_long_messages_situation_in_turn() -> None:
    followups = [_turn("Can I get survivor benefits for that?", SITUATION),
                 _turn("Who pays the funeral costs of a carer in that case then?", SITUATION),
                 _turn("Do I need to tell anyone about it before the deadline?", "I lost my job three weeks ago "
                       "and my landlord wants the rent paid in full by the end of the month.")]
    questions = [_turn(q, answerable=a) for q, a in (("How do I wear a mask?", False), ("Hi?", True),
                                                     ("Is the virus airborne?", False),
                                                     ("Can my cat catch it?", False))]
    out = bench.situated(questions, followups)
    assert [q["query"].rsplit("\n\n", 1) for q in out] == [
        [SITUATION, "How do I wear a mask?"],
        [followups[2]["history"][0]["content"], "Is the virus airborne?"],
        [SITUATION, "Can my cat catch it?"],  # two situations, in turn
    ]
    assert not any(q["answerable"] for q in out)


def test_the_table_counts_each_bucket_from_status_and_evidence() -> None:
    judged = [(5, True, "insufficient", "none"), (8, True, "answered", "weak"), (10, True, "answered", "clear"),
              (30, True, "answered", "clear"), (9, False, "insufficient", "none"), (11, False, "answered", "weak"),
              (40, False, "degraded", "clear")]
    head, rule, short, middle, total = bench.table(judged)
    assert "false abstention" in head and set(rule) <= {"|", "-"}
    cells = [c.strip() for c in short.split("|")[1:-1]]
    assert cells == ["<= 12 words", "3", "1/3     33.3%", "1/3     33.3%", "2", "1/2     50.0%", "1/2     50.0%",
                     "2/2    100.0%"]
    assert [c.strip() for c in middle.split("|")[1:-1]][:2] == ["25-49 words", "1"]
    assert [c.strip() for c in total.split("|")[1:-1]][-1] == "2/3     66.7%"
