"""RULER QA1/QA2: reading as RULER does, context building and sizing, the metric on
hand-worked cases, and retrieve-then-answer's second step."""

import json

import pytest

from longctx.errors import DataFileError, ParameterError
from longctx.tasks import ruler_qa as rq


@pytest.fixture
def squad(tmp_path):
    data = {"data": [
        {"title": "A", "paragraphs": [
            {"context": "Paris is the capital of France.", "qas": [
                {"id": "q1", "question": "What is the capital of France?", "is_impossible": False,
                 "answers": [{"text": "Paris", "answer_start": 0}, {"text": "paris", "answer_start": 0}]},
                {"id": "q2", "question": "Unanswerable?", "is_impossible": True, "answers": []}]},
            {"context": "France is in Europe.", "qas": []}]},
        {"title": "B", "paragraphs": [{"context": f"Filler paragraph number {i}." , "qas": []} for i in range(20)]}]}
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data))
    return rq.read_squad(path)


def test_squad_reading_keeps_answerable_questions_and_article_neighbours(squad):
    assert [q.id for q in squad.questions] == ["qa1-q1"]
    q = squad.questions[0]
    assert squad.documents[q.gold[0]] == "Paris is the capital of France."
    assert [squad.documents[i] for i in q.more] == ["France is in Europe."]
    assert len(squad.documents) == 22


def test_hotpot_documents_are_title_newline_text(tmp_path):
    data = [{"_id": "h1", "question": "Q?", "answer": "yes",
             "context": [["T1", ["a.", " b."]], ["T2", ["c."]]]}]
    (tmp_path / "h.json").write_text(json.dumps(data))
    ruler = rq.read_hotpotqa(tmp_path / "h.json")
    assert ruler.documents == ("T1\na. b.", "T2\nc.") and ruler.questions[0].gold == (0, 1)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataFileError, match="not valid JSON"):
        rq.read_hotpotqa(tmp_path / "bad.json")


def test_context_holds_gold_then_article_then_random_and_is_nested(squad):
    q = squad.questions[0]
    two = rq.context_documents(squad, q, 2)
    assert sorted(two) == sorted(["Paris is the capital of France.", "France is in Europe."])
    six, ten = rq.context_documents(squad, q, 6), rq.context_documents(squad, q, 10)
    assert set(six) < set(ten) and "Paris is the capital of France." in six
    assert rq.context_documents(squad, q, 6, seed=0) == six != rq.context_documents(squad, q, 6, seed=1)


def test_fit_documents_takes_the_most_that_fit_the_length(squad):
    q = squad.questions[0]
    words = lambda text: len(text.split())  # noqa: E731 - a stand-in tokenizer
    k = rq.fit_documents(squad, q, 160, words)
    assert words(rq.build_prompt(q.query, rq.context_documents(squad, q, k))) <= 160 - 32
    assert words(rq.build_prompt(q.query, rq.context_documents(squad, q, k + 1))) > 160 - 32
    with pytest.raises(ParameterError, match="exceed 40 tokens"):
        rq.fit_documents(squad, q, 40, words)


def test_string_match_part_is_rulers_definition():
    assert rq.string_match_part("The capital is PARIS.", ["Paris"]) == 1.0
    assert rq.string_match_part("Lyon", ["Paris", "paris"]) == 0.0
    assert rq.string_match_part("documentary film", ["Documentary", "film noir"]) == 1.0  # any answer suffices
    assert rq.string_match_part("anything", []) == 0.0


def test_retrieve_then_answer_uses_only_the_recited_documents(squad):
    q = squad.questions[0]
    reqs = rq.make_requests(squad, [q], lengths=[400], count_tokens=lambda t: len(t.split()))
    assert [r.condition["mode"] for r in reqs] == ["answer", "recite"]
    assert "copy them fully WORD BY WORD" in reqs[1].prompt and reqs[0].prompt.endswith("Answer:")
    row = {"example_id": q.id, "condition": reqs[1].condition,
           "output": "# Document 3\nParis is the capital of France.\n\n# Document 7\n"}
    second = rq.answer_from_recitation_requests([q], [row])[0]
    assert second.condition["mode"] == "retrieve_then_answer"
    assert "Document 1:\nParis is the capital of France." in second.prompt and "Document 2:" not in second.prompt


def test_the_shipped_sets_load():
    qa1, qa2 = rq.load("qa1"), rq.load("qa2")
    assert len(qa1.questions) == 5928 and len(qa2.questions) == 7405
    assert all(2 <= len(q.gold) <= 10 for q in qa2.questions) and len(qa2.questions[0].gold) == 10
    with pytest.raises(ParameterError, match="unknown RULER QA subtask"):
        rq.load("qa3")
