"""Lost in the Middle multi-document question answering (Liu et al., 2023, section 2).

A NaturalQuestions-Open question comes with k documents: exactly one contains an
answer (the gold document) and k-1 are distractors. The gold document is moved to
a chosen position; the distractors keep their order (decreasing relevance).
Accuracy (:func:`score`) is the paper's: the first line of the response, SQuAD-
normalized, contains a normalized gold answer.

Where examples come from:

* :func:`read_release_file`: the paper's own inputs
  (``nq-open-{10,20,30}_total_documents_gold_at_{i}.jsonl.gz``: question, answers,
  ctxs with title/text/hasanswer/isgold). Contriever retrieved their distractors
  from all of Wikipedia; those files cannot be fetched offline.
* :func:`read_oracle` + :func:`attach_distractors`: an offline reconstruction from
  ``nq-open-oracle.jsonl.gz`` (2,655 questions with their gold chunk). Distractors
  are the other questions' gold chunks, ranked by BM25 against the question
  (or drawn at random, the paper's appendix B), never containing a gold answer.
* :func:`write_release_file`: writes any examples back in the release format,
  byte for byte the same for the same inputs and seed.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm import tqdm

from ..data import fetch
from ..errors import DataFileError, ParameterError
from ..metrics import includes_normalized, normalize_answer, qa_accuracy
from ..prompts import load_prompt
from ..requests import Request, StopRule
from ..retrieval import BM25Ranker
from ..transforms import Example, Item, Position, fill_slots, recorded_fields, span_of, system_of

TASK = "multidoc_qa"
# The paper decodes up to 100 tokens; the stop rule ends the answer at its first line,
# which is all the metric reads.
MAX_NEW_TOKENS = 100
DISTRACTOR_KINDS = ("bm25", "random")


@dataclass(frozen=True)
class Document:
    title: str
    text: str
    hasanswer: bool = False
    isgold: bool = False
    # Id, score, ... from the source
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict:
        return {
            **self.extra,
            "title": self.title,
            "text": self.text,
            "hasanswer": self.hasanswer,
            "isgold": self.isgold,
        }


@dataclass(frozen=True)
class QAExample:
    example_id: str
    question: str
    answers: tuple[str, ...]
    gold: Document
    distractors: tuple[Document, ...] = ()  # in decreasing relevance
    source: str = "oracle"

    def documents(self, num_documents: int, gold_index: int) -> list[Document]:
        """The first ``num_documents - 1`` distractors with the gold document at 0-based ``gold_index``."""
        if num_documents < 1:
            raise ParameterError(f"num_documents must be >= 1, got {num_documents}")
        if num_documents - 1 > len(self.distractors):
            raise ParameterError(
                f"example {self.example_id} has {len(self.distractors)} distractors; "
                f"{num_documents} documents need {num_documents - 1} (attach more with attach_distractors)"
            )
        if not 0 <= gold_index < num_documents:
            raise ParameterError(f"gold index {gold_index} outside 0..{num_documents - 1}")
        docs = list(self.distractors[: num_documents - 1])
        docs.insert(gold_index, self.gold)
        return docs


def _open_text(path: Path):
    return (
        gzip.open(path, "rt", encoding="utf-8")
        if path.suffix == ".gz"
        else open(path, encoding="utf-8")
    )


def _records(path: str | Path, limit: int | None):
    path = Path(path)
    if not path.exists():
        raise DataFileError(f"{path} does not exist")
    try:
        with _open_text(path) as f:
            for n, line in enumerate(f):
                if limit is not None and n >= limit:
                    return
                yield n, json.loads(line)
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataFileError(
            f"{path} is not a readable JSONL file ({type(err).__name__}: {err})"
        ) from None


def _document(ctx: dict) -> Document:
    extra = {k: v for k, v in ctx.items() if k not in ("title", "text", "hasanswer", "isgold")}
    return Document(
        ctx["title"],
        ctx["text"],
        bool(ctx.get("hasanswer", False)),
        bool(ctx.get("isgold", False)),
        extra,
    )


def read_release_file(path: str | Path, limit: int | None = None) -> list[QAExample]:
    """Read a Lost in the Middle QA file (release or :func:`write_release_file` format).

    Exactly one ctx must have ``isgold``; the others become distractors in file
    order, so ``example.documents(k, i)`` with the file's own k and gold index gives
    back the file's ctxs in their order.
    """
    path = Path(path)
    out = []
    for n, rec in _records(path, limit):
        try:
            ctxs = rec["ctxs"]
            gold = [i for i, c in enumerate(ctxs) if c.get("isgold")]
            if len(gold) != 1:
                raise ValueError(f"expected one ctx with isgold, found {len(gold)}")
            docs = [_document(c) for c in ctxs]
            out.append(
                QAExample(
                    example_id=rec.get("example_id", f"nq-{n:04d}"),
                    question=rec["question"],
                    answers=tuple(rec["answers"]),
                    gold=docs[gold[0]],
                    distractors=tuple(d for i, d in enumerate(docs) if i != gold[0]),
                    source=path.name.split(".")[0],
                )
            )
        except (KeyError, TypeError, ValueError) as err:
            raise DataFileError(
                f"{path} line {n + 1}: not a Lost in the Middle QA record ({err})"
            ) from None
    if not out:
        raise DataFileError(f"{path} holds no records")
    return out


def read_oracle(path: str | Path | None = None, limit: int | None = None) -> list[QAExample]:
    """The 2,655 NQ-Open questions with only their gold chunk (``nq-open-oracle.jsonl.gz``).

    ``path`` defaults to the registered, checksum-verified file (mirror or download).
    Example ids are ``nq-<line number>``, stable across every file derived from it.
    """
    return read_release_file(path or fetch("nq-open-oracle"), limit)


def _contains_answer(
    doc: Document, normalized_answers: Sequence[str], whole_words: bool = False
) -> bool:
    """Whether a normalized answer occurs in the document's normalized "title text": as a
    substring, or with ``whole_words`` only as a run of whole words (the token-level match
    of the paper's DPR-style ``hasanswer``)."""
    return includes_normalized(
        normalize_answer(f"{doc.title} {doc.text}"), normalized_answers, whole_words=whole_words
    )


def attach_distractors(
    examples: Sequence[QAExample],
    num_distractors: int,
    kind: str = "bm25",
    seed: int = 0,
    pool: Sequence[QAExample] | None = None,
    progress: bool = False,
) -> list[QAExample]:
    """Give each example ``num_distractors`` distractors drawn from the gold chunks of ``pool``.

    ``pool`` defaults to ``examples`` (use the full oracle set for realistic
    competition). A candidate is never the example's own gold chunk and never
    contains a normalized gold answer in its title or text, so an example keeps
    exactly one answer-bearing document.

    * ``kind="bm25"``: candidates ranked by BM25 (English stopwords removed) between
      the question and "title text", most relevant first, ties broken by pool order;
      the paper's retrieved distractors, with BM25 over this pool in place of
      Contriever over Wikipedia.
    * ``kind="random"``: a uniform sample (appendix B), seeded per example.

    An answer so short that nearly every chunk holds it as a substring (NQ-Open's "S", the
    letter the Atlantic is shaped like) would leave too few candidates; for such an example
    alone the answer is matched as whole words instead, as the paper's token-level
    ``hasanswer`` labels do. Every other example keeps the substring rule.
    """
    if kind not in DISTRACTOR_KINDS:
        raise ParameterError(
            f"unknown distractor kind '{kind}'; use one of {', '.join(DISTRACTOR_KINDS)}"
        )
    if num_distractors < 0:
        raise ParameterError(f"num_distractors must be >= 0, got {num_distractors}")
    pool = list(pool if pool is not None else examples)
    # Each distinct chunk once, in pool order (several questions share a gold chunk).
    seen: dict[tuple[str, str], Document] = {}
    for ex in pool:
        seen.setdefault((ex.gold.title, ex.gold.text), ex.gold)
    candidates = [replace(d, hasanswer=False, isgold=False) for d in seen.values()]
    scorer = BM25Ranker([f"{d.title} {d.text}" for d in candidates]) if kind == "bm25" else None

    out = []
    for ex in tqdm(examples, desc=f"{kind} distractors", disable=not progress):
        answers = [normalize_answer(a) for a in ex.answers]
        if scorer is not None:
            order = scorer.ranking(ex.question)
        else:
            order = list(range(len(candidates)))
            random.Random(f"{seed}:{ex.example_id}").shuffle(order)
        chosen = _eligible(candidates, order, ex, answers, num_distractors)
        if len(chosen) < num_distractors:
            chosen = _eligible(candidates, order, ex, answers, num_distractors, whole_words=True)
        if len(chosen) < num_distractors:
            raise ParameterError(
                f"only {len(chosen)} eligible distractors for {ex.example_id}, {num_distractors} requested; "
                "use a larger pool"
            )
        out.append(replace(ex, distractors=tuple(chosen), source=f"oracle+{kind}"))
    return out


def _eligible(
    candidates: Sequence[Document],
    order: Sequence[int],
    ex: QAExample,
    answers: Sequence[str],
    limit: int,
    whole_words: bool = False,
) -> list[Document]:
    """Up to ``limit`` candidates in ``order`` that are not ``ex``'s gold chunk and hold no answer."""
    chosen = []
    for i in order:
        if len(chosen) == limit:
            break
        doc = candidates[i]
        if (doc.title, doc.text) != (ex.gold.title, ex.gold.text) and not _contains_answer(
            doc, answers, whole_words
        ):
            chosen.append(doc)
    return chosen


def shuffle_distractors(example: QAExample, seed: int = 0) -> QAExample:
    """The same distractors in a seeded random order (appendix C)."""
    docs = list(example.distractors)
    random.Random(f"shuffle:{seed}:{example.example_id}").shuffle(docs)
    return replace(example, distractors=tuple(docs))


def document_lines(documents: Iterable[Document]) -> list[str]:
    """Each document as the prompt writes it, ``Document [i](Title: <title>) <text>``,
    numbered from 1 (the paper's Figure 2). A text may hold line breaks of its own, so the
    prompt's lines are not its documents."""
    return [f"Document [{i}](Title: {d.title}) {d.text}" for i, d in enumerate(documents, start=1)]


def format_documents(documents: Iterable[Document]) -> str:
    """The documents, one after another on lines of their own (:func:`document_lines`)."""
    return "\n".join(document_lines(documents))


def build_prompt(
    question: str,
    documents: Sequence[Document],
    *,
    query_aware: bool = False,
    mention_random_ordering: bool = False,
) -> str:
    """The paper's prompts: with documents (optionally the question also before them, or
    the "ordered randomly" instruction), or closed-book when ``documents`` is empty."""
    if not documents:
        if query_aware or mention_random_ordering:
            raise ParameterError("closed-book prompts have no documents to contextualize or order")
        return load_prompt("closedbook_qa").format(question=question)
    if query_aware and mention_random_ordering:
        # As in the paper's code: the two variants were never combined.
        raise ParameterError(
            "query-aware contextualization and the random-ordering instruction cannot be combined"
        )
    name = (
        "qa_with_query_aware_contextualization"
        if query_aware
        else "qa_ordered_randomly"
        if mention_random_ordering
        else "qa"
    )
    return load_prompt(name).format(question=question, search_results=format_documents(documents))


def position_indices(num_documents: int, positions: Sequence[float | int]) -> list[int]:
    """0-based gold indices. Floats in [0, 1] are relative depths (0 first, 1 last),
    rounded down so that 0.5 gives the paper's middle indices 4, 9 and 14 for 10, 20
    and 30 documents; ints are 1-based positions. Duplicates are dropped. (One rule with
    :class:`longctx.transforms.Position`, whose ``floor`` convention this is.)"""
    out: list[int] = []
    for p in positions:
        idx = Position(p, "floor").index(num_documents, "document")
        if idx not in out:
            out.append(idx)
    return out


def _stop() -> StopRule:
    return StopRule(newline=True)


def make_requests(
    examples: Sequence[QAExample],
    num_documents: int,
    positions: Sequence[float | int],
    *,
    query_aware: bool = False,
    mention_random_ordering: bool = False,
    distractors: str = "bm25",
) -> list[Request]:
    """One request per (example, gold position) with ``num_documents`` documents."""
    reqs = []
    for ex in examples:
        for idx in position_indices(num_documents, positions):
            docs = ex.documents(num_documents, idx)
            reqs.append(
                Request(
                    task=TASK,
                    example_id=ex.example_id,
                    prompt=build_prompt(
                        ex.question,
                        docs,
                        query_aware=query_aware,
                        mention_random_ordering=mention_random_ordering,
                    ),
                    gold=ex.answers,
                    condition={
                        "setting": "documents",
                        "num_documents": num_documents,
                        "gold_index": idx,
                        "query_aware": query_aware,
                        "random_order": mention_random_ordering,
                        "distractors": distractors,
                        "source": ex.source,
                    },
                    max_new_tokens=MAX_NEW_TOKENS,
                    stop=_stop(),
                )
            )
    return reqs


def make_baseline_requests(examples: Sequence[QAExample]) -> list[Request]:
    """Closed-book (question only) and oracle (only the gold document) requests (Table 1)."""
    reqs = []
    for ex in examples:
        for setting, docs in (("closed-book", []), ("oracle", [ex.gold])):
            reqs.append(
                Request(
                    task=TASK,
                    example_id=ex.example_id,
                    prompt=build_prompt(ex.question, docs),
                    gold=ex.answers,
                    condition={
                        "setting": setting,
                        "num_documents": len(docs),
                        "gold_index": 0 if docs else None,
                        "query_aware": False,
                        "random_order": False,
                        "distractors": "none",
                        "source": ex.source,
                    },
                    max_new_tokens=MAX_NEW_TOKENS,
                    stop=_stop(),
                )
            )
    return reqs


def score(row: dict) -> float:
    return qa_accuracy(row["output"], row["gold"])


def write_release_file(
    examples: Sequence[QAExample], num_documents: int, gold_index: int, path: str | Path
) -> str:
    """Write ``examples`` in the release format (gold at ``gold_index``); return its sha256.

    Gzip with a fixed mtime and no file name, and sorted JSON keys, so the same
    examples always give the same bytes.
    """
    path = Path(path)
    lines = []
    for ex in examples:
        docs = ex.documents(num_documents, gold_index)
        lines.append(
            json.dumps(
                {
                    "example_id": ex.example_id,
                    "question": ex.question,
                    "answers": list(ex.answers),
                    "ctxs": [d.to_dict() for d in docs],
                },
                ensure_ascii=False,
                sort_keys=True,
            )
        )
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if path.suffix == ".gz":
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
            gz.write(data)
        data = buf.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)
    return hashlib.sha256(data).hexdigest()


def release_filename(num_documents: int, gold_index: int) -> str:
    """The paper's file name for ``num_documents`` documents with the gold at 0-based ``gold_index``."""
    return f"nq-open-{num_documents}_total_documents_gold_at_{gold_index}.jsonl.gz"


# ---------------------------------------------------------------------------------------------
# Through transforms: an example in the transforms' terms, and its request


def to_example(example: QAExample) -> Example:
    """A multi-document QA example for :mod:`longctx.transforms`: the gold document alone in
    the context, its distractors the ranked candidates."""

    def item(d, gold=False):
        return Item(d.text, d.title, gold, "document")

    ranking = example.source.split("+", 1)[1] if "+" in example.source else example.source
    return Example(
        TASK,
        example.example_id,
        example.question,
        tuple(example.answers),
        (item(example.gold, True),),
        tuple(item(d) for d in example.distractors),
        ranking,
        {"source": example.source},
    )


def render(example: Example) -> Request:
    """Lost in the Middle's prompts through :func:`make_requests` (documents), or its
    closed-book / oracle baselines. Condition: the chapter's (setting, number of documents,
    gold index, query-aware, random order, distractor ranking, source), C-NORM's (order
    seed, method, delimiter, ratio) when those transforms ran, and
    :func:`~longctx.transforms.recorded_fields`."""
    s = example.settings
    docs = [Document(it.title, it.text, hasanswer=it.gold, isgold=it.gold) for it in example.items]
    qa_ex = QAExample(
        example.example_id,
        example.question,
        example.answers,
        next((d for d in docs if d.isgold), Document("", "")),
        tuple(d for d in docs if not d.isgold),
        example.fields["source"],
    )
    if s.get("closed_book") or (len(docs) == 1 and docs[0].isgold):
        # No context, or the gold document alone: the paper's closed-book and oracle baselines.
        setting = "closed-book" if s.get("closed_book") else "oracle"
        req = next(r for r in make_baseline_requests([qa_ex]) if r.condition["setting"] == setting)
    else:
        req = make_requests(
            [qa_ex],
            len(docs),
            [example.gold_index + 1],
            query_aware=s.get("query_aware", False),
            mention_random_ordering=s.get("random_order", False),
            distractors=example.ranking,
        )[0]
    cond = dict(req.condition)
    if "order_seed" in s:
        cond["seed"] = s["order_seed"]
    if "method" in s:
        cond.update(method=s["method"], delimiter=s["delimiter"], ratio=s["ratio"])
    cond.update(recorded_fields(example))
    prompt = fill_slots(req.prompt, span_of(req.prompt, format_documents(docs)), example)
    return replace(req, prompt=prompt, condition=cond, system=system_of(example))
