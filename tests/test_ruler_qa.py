"""RULER QA1/QA2: reading as RULER does, context building and sizing, the metric on
hand-worked cases, and retrieve-then-answer's second step."""

import json

import pytest

from longctx.errors import DataFileError, ParameterError
from longctx.tasks import ruler_qa as rq


@pytest.fixture
def squad(tmp_path):
    data = {
        "data": [
            {
                "title": "A",
                "paragraphs": [
                    {
                        "context": "Paris is the capital of France.",
                        "qas": [
                            {
                                "id": "q1",
                                "question": "What is the capital of France?",
                                "is_impossible": False,
                                "answers": [
                                    {"text": "Paris", "answer_start": 0},
                                    {"text": "paris", "answer_start": 0},
                                ],
                            },
                            {
                                "id": "q2",
                                "question": "Unanswerable?",
                                "is_impossible": True,
                                "answers": [],
                            },
                        ],
                    },
                    {"context": "France is in Europe.", "qas": []},
                ],
            },
            {
                "title": "B",
                "paragraphs": [
                    {"context": f"Filler paragraph number {i}.", "qas": []} for i in range(20)
                ],
            },
        ]
    }
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
    data = [
        {
            "_id": "h1",
            "question": "Q?",
            "answer": "yes",
            "supporting_facts": [["T2", 0]],
            "context": [["T1", ["a.", " b."]], ["T2", ["c."]]],
        }
    ]
    (tmp_path / "h.json").write_text(json.dumps(data))
    ruler = rq.read_hotpotqa(tmp_path / "h.json")
    assert ruler.documents == ("T1\na. b.", "T2\nc.") and ruler.questions[0].gold == (0, 1)
    assert ruler.questions[0].supporting == (1,)  # the paragraph the supporting facts cite
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataFileError, match="not valid JSON"):
        rq.read_hotpotqa(tmp_path / "bad.json")


def test_context_holds_gold_then_article_then_random_and_is_nested(squad):
    q = squad.questions[0]
    two = rq.context_documents(squad, q, 2)
    assert sorted(two) == sorted(["Paris is the capital of France.", "France is in Europe."])
    six, ten = rq.context_documents(squad, q, 6), rq.context_documents(squad, q, 10)
    assert set(six) < set(ten) and "Paris is the capital of France." in six
    assert (
        rq.context_documents(squad, q, 6, seed=0)
        == six
        != rq.context_documents(squad, q, 6, seed=1)
    )


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
    # Any answer suffices
    assert rq.string_match_part("documentary film", ["Documentary", "film noir"]) == 1.0
    assert rq.string_match_part("anything", []) == 0.0


def test_retrieve_then_answer_uses_only_the_recited_documents(squad):
    q = squad.questions[0]
    reqs = rq.make_requests(squad, [q], lengths=[400], count_tokens=lambda t: len(t.split()))
    assert [r.condition["mode"] for r in reqs] == ["answer", "recite"]
    assert "copy them fully WORD BY WORD" in reqs[1].prompt and reqs[0].prompt.endswith("Answer:")
    row = {
        "example_id": q.id,
        "condition": reqs[1].condition,
        "output": "# Document 3\nParis is the capital of France.\n\n# Document 7\n",
    }
    second = rq.answer_from_recitation_requests([q], [row])[0]
    assert second.condition["mode"] == "retrieve_then_answer"
    assert (
        "Document 1:\nParis is the capital of France." in second.prompt
        and "Document 2:" not in second.prompt
    )


def test_named_documents_reads_header_numbers_once_in_order():
    assert rq.named_documents("# Document 21") == [21]
    assert rq.named_documents("# Document 3\ntext\n\nDocument 7:\nmore\n# Document 3\n") == [3, 7]
    assert rq.named_documents("The answer is 3 documents.") == []
    assert rq.named_documents("Document 11: The region is home to 2.5 million insect species.") == [
        11
    ]


def test_answer_from_named_documents_copies_them_verbatim_from_the_context(squad):
    q = squad.questions[0]
    reqs = rq.make_requests(squad, [q], lengths=[400], count_tokens=lambda t: len(t.split()))
    recite = reqs[1]
    docs = rq.context_documents(squad, q, recite.condition["num_documents"])
    gold_number = docs.index("Paris is the capital of France.") + 1
    # The reader names the gold document but copies nothing; 99 is not in the context.
    row = {
        "example_id": q.id,
        "condition": recite.condition,
        "output": f"# Document {gold_number}\n# Document 99",
    }
    named = rq.answer_from_named_documents_requests(squad, [q], [row])[0]
    assert named.condition["mode"] == "answer_from_named" and named.meta == {
        "named_documents": [gold_number]
    }
    assert (
        "Document 1:\nParis is the capital of France." in named.prompt
        and "Document 2:" not in named.prompt
    )
    # The paper's second step sees only the header: no document text at all.
    copied = rq.answer_from_recitation_requests([q], [row])[0]
    assert "Paris is the capital" not in copied.prompt
    nothing = rq.answer_from_named_documents_requests(squad, [q], [{**row, "output": "Paris"}])[0]
    assert nothing.meta == {"named_documents": []} and "Document 1:" not in nothing.prompt


def test_recitation_diagnostics_on_hand_worked_recitations(squad):
    q = squad.questions[0]
    recite = rq.make_requests(squad, [q], lengths=[400], count_tokens=lambda t: len(t.split()))[1]
    docs = rq.context_documents(squad, q, recite.condition["num_documents"])
    gold, other = (
        docs.index("Paris is the capital of France.") + 1,
        docs.index("France is in Europe.") + 1,
    )

    def diag(output):
        return rq.recitation_diagnostics(
            squad, q, {"condition": recite.condition, "output": output}
        )

    assert diag(f"# Document {gold}") == {
        "named": 1,
        "names_a_supporting": True,
        "copies_text": False,
        "copies_supporting": False,
        "answer_in_recitation": False,
    }
    # A wrong number over the right text still copies the supporting document.
    assert diag(f"Document {other}: Paris is the capital of France.") == {
        "named": 1,
        "names_a_supporting": False,
        "copies_text": True,
        "copies_supporting": True,
        "answer_in_recitation": True,
    }
    # A paraphrase holds the answer but copies nothing verbatim.
    assert diag("# Document 1\nThe French capital is Paris.") == {
        "named": 1,
        "names_a_supporting": gold == 1,
        "copies_text": False,
        "copies_supporting": False,
        "answer_in_recitation": True,
    }
    # A distractor copied word by word (20 characters, the minimum): copied, but not the one that holds the answer.
    assert diag(f"# Document {other}\nFrance is in Europe.") == {
        "named": 1,
        "names_a_supporting": False,
        "copies_text": True,
        "copies_supporting": False,
        "answer_in_recitation": False,
    }
    assert diag("# Document 1\nFrance is Europe.")["copies_text"] is False  # too short to count


def test_the_shipped_sets_load():
    qa1, qa2 = rq.load("qa1"), rq.load("qa2")
    assert len(qa1.questions) == 5928 and len(qa2.questions) == 7405
    assert all(2 <= len(q.gold) <= 10 for q in qa2.questions) and len(qa2.questions[0].gold) == 10
    assert all(
        1 <= len(q.supporting) <= 2 and set(q.supporting) <= set(q.gold) for q in qa2.questions
    )
    assert all(q.supporting == q.gold for q in qa1.questions)
    with pytest.raises(ParameterError, match="unknown RULER QA subtask"):
        rq.load("qa3")


def test_score_rows_scores_answers_and_diagnoses_recitations(squad):
    q = squad.questions[0]
    answer, recite = rq.make_requests(
        squad, [q], lengths=[400], count_tokens=lambda t: len(t.split())
    )
    rows = [
        {
            "example_id": q.id,
            "condition": answer.condition,
            "output": "It is Paris.",
            "gold": list(q.answers),
            "new_tokens": 4,
        },
        {
            "example_id": q.id,
            "condition": recite.condition,
            "output": "# Document 1",
            "gold": list(q.answers),
            "new_tokens": 5,
        },
    ]
    scored = rq.score_rows(rows, {"qa1": (squad, [q])})
    assert [(s["mode"], s["correct"]) for s in scored] == [("answer", 1.0), ("recite", 0.0)]
    assert (
        "names_a_supporting" not in scored[0]
        and scored[1]["named"] == 1
        and not scored[1]["copies_text"]
    )
    with pytest.raises(ParameterError, match="not among"):
        rq.score_rows([{**rows[0], "example_id": "qa1-other"}], {"qa1": (squad, [q])})


def _search_fit(ruler, q, length, count_tokens, seed=0):
    """The largest k whose prompt fits, by trying every k (the definition ContextSizer meets)."""
    budget = length - rq.MAX_NEW_TOKENS
    fitting = [
        k
        for k in range(len(q.gold), len(ruler.documents) + 1)
        if count_tokens(rq.build_prompt(q.query, rq.context_documents(ruler, q, k, seed))) <= budget
    ]
    return max(fitting)


@pytest.mark.parametrize(
    "count_tokens",
    [lambda t: len(t.split()), lambda t: len(t) // 4 + t.count("\n")],
    ids=["words", "characters"],
)
def test_context_sizer_finds_the_largest_fitting_context_in_few_whole_prompt_counts(
    squad, count_tokens
):
    q = squad.questions[0]
    sizer = rq.ContextSizer(squad, count_tokens)
    least = (
        count_tokens(rq.build_prompt(q.query, rq.context_documents(squad, q, 1)))
        + rq.MAX_NEW_TOKENS
    )
    for length in (least, least + 5, least + 17, least + 40, least + 90):
        before = sizer.exact_counts
        assert (
            sizer.fit(q, length)
            == _search_fit(squad, q, length, count_tokens)
            == rq.fit_documents(squad, q, length, count_tokens)
        )
        # The estimate lands on the answer or next to it: the smallest prompt, the candidate
        # and its neighbour, a step or two more where the estimate was off; a search takes ~8.
        assert sizer.exact_counts - before <= 5
    assert sizer.fit(q, 10_000) == len(squad.documents)  # everything fits


def test_context_documents_from_saved_draws_equal_a_fresh_draw(squad):
    q = squad.questions[0]
    draws = rq._draws(squad, q, 3)
    for k in range(len(q.gold), len(squad.documents) + 2):
        assert rq.context_documents(squad, q, k, 3, draws) == rq.context_documents(squad, q, k, 3)


def test_a_recitation_identifies_a_document_holding_the_answer_by_its_text_or_its_number(squad):
    q = squad.questions[0]
    recite = rq.make_requests(squad, [q], lengths=[400], count_tokens=lambda t: len(t.split()))[1]
    docs = rq.context_documents(squad, q, recite.condition["num_documents"])
    gold = docs.index("Paris is the capital of France.") + 1
    other = docs.index("France is in Europe.") + 1

    def identifies(output):
        row = {"condition": recite.condition, "output": output}
        return rq.identifies_supporting(rq.recitation_diagnostics(squad, q, row))

    # named: the right number with nothing under it (the second step reads the document)
    assert identifies(f"# Document {gold}")
    # copied: the right text under a wrong number
    assert identifies(f"Document {other}: Paris is the capital of France.")
    # neither: a distractor named and copied, or a paraphrase under a wrong number
    assert not identifies(f"# Document {other}\nFrance is in Europe.")
    assert not identifies(f"# Document {other}\nThe French capital is Paris.")
    assert not identifies("")
