"""Open-domain QA with a retriever and a reader (Lost in the Middle, section 5, Figure 11).

The paper retrieves k = 5 ... 50 Wikipedia passages with Contriever for each NQ-Open
question and finds that the retriever's recall keeps rising with k while reader accuracy
saturates early. Here the collection is the NQ-Open oracle's distinct gold chunks (2,655
questions share fewer chunks) and the retriever is BM25 over "title text": a much smaller,
easier collection than Wikipedia, where every question's answer-bearing chunk is present.

* **Recall@k** (the paper's retriever curve): some chunk among the top k contains a
  normalized gold answer (Lost in the Middle's ``hasanswer`` test).
* **Reader accuracy**: the paper's prompt with the top k chunks in retrieval order (best
  first, as the paper orders them), scored by Lost in the Middle's substring match.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace

import pandas as pd
from tqdm import tqdm

from ..errors import ParameterError
from ..metrics import normalize_answer
from ..requests import Request
from ..retrieval import BM25Ranker
from . import multidoc_qa as qa

TASK = "open_domain_qa"


class ChunkRetriever:
    """BM25 over the distinct gold chunks of ``pool`` (title and text), built once."""

    def __init__(self, pool: Sequence[qa.QAExample]):
        seen: dict[tuple[str, str], qa.Document] = {}
        for ex in pool:
            seen.setdefault(
                (ex.gold.title, ex.gold.text), replace(ex.gold, hasanswer=False, isgold=False)
            )
        self.chunks = list(seen.values())
        self.ranker = BM25Ranker([f"{d.title} {d.text}" for d in self.chunks])

    def top(self, question: str, k: int) -> list[qa.Document]:
        if not 1 <= k <= len(self.chunks):
            raise ParameterError(f"k must be in 1..{len(self.chunks)}, got {k}")
        return [self.chunks[i] for i in self.ranker.ranking(question)[:k]]


def has_answer(doc: qa.Document, answers: Sequence[str]) -> bool:
    """Lost in the Middle's ``hasanswer``: a normalized gold answer is a substring of the
    normalized title and text."""
    text = _normalized(doc.title, doc.text)
    return any(a and a in text for a in (normalize_answer(x) for x in answers))


# Every question's top chunks are checked, and the same chunks recur across questions
@functools.lru_cache(maxsize=1 << 16)
def _normalized(title: str, text: str) -> str:
    return normalize_answer(f"{title} {text}")


def recall_at_k(docs: Sequence[qa.Document], answers: Sequence[str], k: int) -> bool:
    return any(has_answer(d, answers) for d in docs[:k])


def _check_ks(ks: Sequence[int]) -> None:
    if not ks or any(k < 1 for k in ks):
        raise ParameterError(f"ks must be positive numbers of documents, got {list(ks)}")


def make_requests(
    examples: Sequence[qa.QAExample], retriever: ChunkRetriever, ks: Sequence[int]
) -> list[Request]:
    """One request per (question, k): the top k chunks in retrieval order. The condition
    records whether the retriever found an answer-bearing chunk (recall at k)."""
    _check_ks(ks)
    out = []
    for ex in examples:
        ranked = retriever.top(ex.question, max(ks))
        for k in sorted(set(ks)):
            docs = [replace(d, hasanswer=has_answer(d, ex.answers)) for d in ranked[:k]]
            out.append(
                Request(
                    TASK,
                    ex.example_id,
                    qa.build_prompt(ex.question, docs),
                    ex.answers,
                    {
                        "setting": "open-domain",
                        "k": k,
                        "retriever": "bm25",
                        "collection": "nq-open-oracle",
                        "recall": any(d.hasanswer for d in docs),
                    },
                    max_new_tokens=qa.MAX_NEW_TOKENS,
                    stop=qa._stop(),
                    meta={"answer_ranks": [i + 1 for i, d in enumerate(docs) if d.hasanswer]},
                )
            )
    return out


def score(row: dict) -> float:
    return qa.score(row)


def recall_table(
    examples: Sequence[qa.QAExample],
    retriever: ChunkRetriever,
    ks: Sequence[int],
    *,
    progress: bool = False,
):
    """Retriever recall@k for every question of ``examples`` (no reader, so it is cheap to run
    on the whole collection): one row per (question, k) with columns ``example_id``, ``k``
    and ``recall``, the same test :func:`make_requests` records."""
    _check_ks(ks)
    ks = sorted(set(ks))
    rows = []
    for ex in tqdm(examples, desc="BM25 recall@k", disable=not progress):
        ranked = retriever.top(ex.question, ks[-1])
        hits = [has_answer(d, ex.answers) for d in ranked]
        first = hits.index(True) + 1 if any(hits) else None
        rows += [
            {"example_id": ex.example_id, "k": k, "recall": first is not None and first <= k}
            for k in ks
        ]
    return pd.DataFrame(rows)
