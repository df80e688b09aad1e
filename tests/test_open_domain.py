"""Open-domain retriever-reader: recall@k on hand-made chunks and the requests per k."""

import pytest

from longctx.chapters.multidoc_qa import analysis as multidoc_qa_analysis
from longctx.errors import ParameterError
from longctx.tasks import multidoc_qa as qa
from longctx.tasks import open_domain as od


def ex(i, question, answer, title, text):
    return qa.QAExample(f"nq-{i}", question, (answer,), qa.Document(title, text, True, True))


POOL = [
    ex(
        0,
        "who wrote hamlet",
        "Shakespeare",
        "Hamlet",
        "Hamlet is a tragedy written by William Shakespeare.",
    ),
    ex(1, "capital of peru", "Lima", "Peru", "Lima is the capital and largest city of Peru."),
    ex(
        2,
        "tallest mountain",
        "Everest",
        "Everest",
        "Mount Everest is the highest mountain above sea level.",
    ),
    ex(
        3,
        "hamlet setting",
        "Denmark",
        "Hamlet",
        "Hamlet is a tragedy written by William Shakespeare.",
    ),
]


def test_chunks_are_distinct_and_ranked_by_bm25():
    retriever = od.ChunkRetriever(POOL)
    assert len(retriever.chunks) == 3  # two questions share the Hamlet chunk
    assert retriever.top("capital of peru", 1)[0].title == "Peru"
    with pytest.raises(ParameterError, match="k must be in 1..3"):
        retriever.top("x", 4)


def test_recall_uses_lost_in_the_middle_hasanswer():
    docs = [qa.Document("Peru", "Lima is the capital."), qa.Document("X", "the LIMA, bean")]
    assert od.recall_at_k(docs, ["lima"], 1) and od.has_answer(docs[1], ["Lima"])
    assert not od.recall_at_k(docs[:1], ["Cusco"], 1)


def test_requests_per_k_record_recall_and_keep_retrieval_order():
    retriever = od.ChunkRetriever(POOL)
    reqs = od.make_requests(POOL[1:2], retriever, [1, 2, 3])
    assert [r.condition["k"] for r in reqs] == [1, 2, 3] and all(
        r.condition["recall"] for r in reqs
    )
    assert reqs[0].prompt.count("Document [") == 1 and reqs[2].prompt.count("Document [") == 3
    assert reqs[2].prompt.index("(Title: Peru)") < reqs[2].prompt.index("Document [2]")
    assert reqs[0].meta["answer_ranks"] == [1]
    with pytest.raises(ParameterError, match="positive"):
        od.make_requests(POOL, retriever, [0])


def test_curve_and_saturation_hand_worked():
    import pandas as pd

    # Three questions, k = 5 and 10: recall rises from 1/3 to 3/3, accuracy stays at 1/3.
    table = pd.DataFrame(
        [
            {"example_id": "a", "k": 5, "recall": True, "correct": 1.0},
            {"example_id": "a", "k": 10, "recall": True, "correct": 1.0},
            {"example_id": "b", "k": 5, "recall": False, "correct": 0.0},
            {"example_id": "b", "k": 10, "recall": True, "correct": 0.0},
            {"example_id": "c", "k": 5, "recall": False, "correct": 0.0},
            {"example_id": "c", "k": 10, "recall": True, "correct": 0.0},
        ]
    )
    c = multidoc_qa_analysis.curve(table).set_index(["measure", "k"])
    assert c.loc[("retriever recall@k", 5), "accuracy"] == pytest.approx(1 / 3)
    assert c.loc[("retriever recall@k", 10), "accuracy"] == 1.0
    assert c.loc[("reader accuracy", 10), "accuracy"] == pytest.approx(1 / 3)
    assert (c["n"] == 3).all() and (c["ci_low"] <= c["accuracy"]).all()
    s = multidoc_qa_analysis.saturation(table).set_index("measure")
    assert s.loc["retriever recall@k", "change"] == pytest.approx(200 / 3)
    assert s.loc["reader accuracy", "change"] == 0.0 and (s["questions"] == 3).all()
    assert (s["from k"] == 5).all() and (s["to k"] == 10).all()


def test_recall_table_covers_every_question_without_a_reader():
    retriever = od.ChunkRetriever(POOL)
    table = od.recall_table(POOL, retriever, [2, 1])
    assert list(table.columns) == ["example_id", "k", "recall"] and len(table) == 8
    by = table.set_index(["example_id", "k"])["recall"]
    # "hamlet setting" asks for Denmark, which no chunk contains: never recalled.
    assert not by[("nq-3", 1)] and not by[("nq-3", 2)]
    assert by[("nq-1", 1)] and by[("nq-1", 2)]
    # Agrees with the recall the requests record.
    reqs = od.make_requests(POOL, retriever, [1, 2])
    assert {(r.example_id, r.condition["k"]): r.condition["recall"] for r in reqs} == by.to_dict()
    with pytest.raises(ParameterError, match="positive"):
        od.recall_table(POOL, retriever, [0])
