"""Open-domain retriever-reader: recall@k on hand-made chunks and the requests per k."""

import pytest

from longctx.errors import ParameterError
from longctx.tasks import multidoc_qa as qa
from longctx.tasks import open_domain as od


def ex(i, question, answer, title, text):
    return qa.QAExample(f"nq-{i}", question, (answer,), qa.Document(title, text, True, True))


POOL = [ex(0, "who wrote hamlet", "Shakespeare", "Hamlet", "Hamlet is a tragedy written by William Shakespeare."),
        ex(1, "capital of peru", "Lima", "Peru", "Lima is the capital and largest city of Peru."),
        ex(2, "tallest mountain", "Everest", "Everest", "Mount Everest is the highest mountain above sea level."),
        ex(3, "hamlet setting", "Denmark", "Hamlet", "Hamlet is a tragedy written by William Shakespeare.")]


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
    assert [r.condition["k"] for r in reqs] == [1, 2, 3] and all(r.condition["recall"] for r in reqs)
    assert reqs[0].prompt.count("Document [") == 1 and reqs[2].prompt.count("Document [") == 3
    assert reqs[2].prompt.index("(Title: Peru)") < reqs[2].prompt.index("Document [2]")
    assert reqs[0].meta["answer_ranks"] == [1]
    with pytest.raises(ParameterError, match="positive"):
        od.make_requests(POOL, retriever, [0])
