"""Needle questions without literal matches, with and without tags (TAG on NoLiMa-style data).

After Pal et al., "Tagging-Augmented Generation" (2025), sections 3-4 and appendix A,
on needle tasks built the way NoLiMa (Modarressi et al., 2025) builds them: a *needle*
sentence links a character to something ("Actually, Yuki lives next to the Eiffel
Tower."), the *question* asks about it without sharing a content word ("Which character
has been to Paris?"), the gold answer is the character's name, and the needle sits at a
set depth in a haystack of a set length in the reader's tokens.

* Needle sets are read in NoLiMa's ``needle_set.json`` format (:func:`read_needle_set`).
  The project ships its own (``tag_needle_set.json``, see :data:`PROJECT_NEEDLE_SET`),
  because NoLiMa's files cannot be fetched here; pass NoLiMa's file to run theirs.
* The haystack is the package-shipped Paul Graham essays (line wraps joined), cut into
  chunks (:func:`longctx.tagging.chunk_text`); the needle becomes one more chunk at the
  chunk boundary nearest its depth, so every haystack chunk is shared by all needles and
  is tagged once.
* Variants (Table 1): ``baseline`` (no definitions, no tags), ``td`` (tag definitions in
  the system prompt, Figure 5), ``framing`` (TD's system message without the definitions:
  our control, since any system message replaces the chat template's default one),
  ``td_tc_spacy`` and ``td_tc_llm`` (definitions plus tagged context, Figure 6; spaCy NER
  tags with the 18 spaCy categories, or an LLM's tags with the five privileged categories).
  Any variant can also be asked with query-aware contextualization (question before and
  after the context).
* Score: NoLiMa's ``contains`` (:func:`longctx.metrics.nolima_contains`).

NovelQA's multiple-choice files are read by :func:`read_novelqa` and asked with the
paper's Figure 4 prompt (:func:`novelqa_requests`), scored by exact match of the letter.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

import pandas as pd

from ..errors import DataFileError, ParameterError
from ..metrics import nolima_contains
from ..padding import paul_graham_essays
from ..prompts import load_prompt
from ..reader import row_backend
from ..requests import Request, StopRule
from ..tagging import (
    VARIANTS,
    TagCache,
    chunk_text,
    system_prompt,
    tag_chunks,
    tagged_text,
    variant_parts,
)
from ..transforms import Example, Item, fill_slots, system_of

TASK = "tag_needles"
TASKS = (TASK, "novelqa")  # NovelQA multiple choice (Table 2) rides along with the needles
PROJECT_NEEDLE_SET = "longctx"
# Named sets shipped with the package. "longctx-extra" holds 106 more cases of the same
# kinds (new experiment ids, so "longctx" cases and their seeded sample are unchanged).
SHIPPED_NEEDLE_SETS = {
    "longctx": "tag_needle_set.json",
    "longctx-extra": "tag_needle_set_extra.json",
}
VARIANT_LABELS = {
    "baseline": "baseline",
    "framing": "TD framing, no definitions",
    "td": "TD",
    "td_tc_spacy": "TD+TC (spaCy)",
    "td_tc_llm": "TD+TC (LLM tagger)",
    "td_tc_system": "TD+TC's system message, untagged",
}
DEFAULT_DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
MAX_NEW_TOKENS = 32
STOPWORDS = frozenset(
    """a an the of to in on at by for with from and or is was were be been has have had
which who whom what character characters actually there named next lives live can cannot not do does did
this that it its as into than""".split()
)


# ---------------------------------------------------------------- needle sets


@dataclass(frozen=True)
class NeedleCase:
    """One needle/question pair with its character filled in."""

    id: str  # "<experiment>/<test>/<hop>"
    experiment: str
    test: str
    hop: str  # onehop | twohop (NoLiMa's question types)
    needle: str
    question: str
    answer: str  # the character's name
    reasoning_type: str = ""
    args: tuple[str, ...] = ()
    task_template: str = ""  # NoLiMa's own template when the file gives one
    system_prompt: str = ""


_PLACEHOLDER = re.compile(r"\{(CHAR|\d+)\}")


def _fill(template: str, character: str, args: Sequence[str], where: str) -> str:
    def sub(m):
        key = m.group(1)
        if key == "CHAR":
            return character
        k = int(key)
        if not 1 <= k <= len(args):
            raise DataFileError(f"{where}: placeholder {{{k}}} but only {len(args)} input_args")
        return args[k - 1]

    return _PLACEHOLDER.sub(sub, template)


def read_needle_set(source: str | Path = PROJECT_NEEDLE_SET) -> list[dict]:
    """Experiments of a needle set in NoLiMa's ``needle_set.json`` format (a list of
    ``{id, needle, questions: {onehop, twohop}, character_set, tests: {id: {input_args}}}``);
    ``longctx`` and ``longctx-extra`` are the project's own sets shipped with the package."""
    shipped = SHIPPED_NEEDLE_SETS.get(str(source))
    path = files("longctx.tasks").joinpath(shipped) if shipped else Path(source)
    if not path.is_file():
        raise DataFileError(
            f"needle set {path} not found; pass one of {', '.join(SHIPPED_NEEDLE_SETS)} or the "
            "path of a NoLiMa-format needle_set.json"
        )
    try:
        experiments = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise DataFileError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(experiments, list) or not experiments:
        raise DataFileError(f"{path}: expected a non-empty JSON list of needle experiments")
    for k, e in enumerate(experiments):
        missing = [
            f for f in ("id", "needle", "questions", "character_set", "tests") if not e.get(f)
        ]
        if missing:
            raise DataFileError(
                f"{path}: experiment {k} lacks {', '.join(missing)} (NoLiMa needle-set format)"
            )
    return experiments


# Experiments share character sets, and every plan of a process searches the same haystacks
@functools.lru_cache(maxsize=8192)
def _occurs(name: str, text: str) -> bool:
    return bool(re.search(rf"\b{re.escape(name)}\b", text))


def expand_cases(
    experiments: Sequence[dict], *, seed: int = 0, avoid_text: str = ""
) -> list[NeedleCase]:
    """One case per (experiment, test, question type). The character is drawn from the
    experiment's ``character_set`` with a seeded RNG per test, skipping names that occur
    in ``avoid_text`` (the haystack), so the needle's character is the only one to find."""
    cases = []
    for e in experiments:
        names = [n for n in e["character_set"] if not _occurs(n, avoid_text)]
        if not names:
            raise DataFileError(
                f"needle experiment {e['id']}: every character name occurs in the haystack"
            )
        for test_id, test in e["tests"].items():
            args = tuple(test.get("input_args", ()))
            character = random.Random(f"{seed}:{e['id']}:{test_id}").choice(names)
            where = f"needle experiment {e['id']} test {test_id}"
            needle = _fill(e["needle"], character, args, where)
            for hop, question in e["questions"].items():
                cases.append(
                    NeedleCase(
                        f"{e['id']}/{test_id}/{hop}",
                        e["id"],
                        test_id,
                        hop,
                        needle,
                        _fill(question, character, args, where),
                        character,
                        e.get("reasoning_type", ""),
                        args,
                        e.get("task_template") or "",
                        e.get("system_prompt") or "",
                    )
                )
    return cases


def content_words(text: str, ignore: Sequence[str] = ()) -> set[str]:
    """Lower-cased words of ``text`` without stop words and without ``ignore`` (names)."""
    skip = {w.lower() for w in ignore}
    return {
        w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS and w not in skip
    }


def literal_overlap(case: NeedleCase) -> set[str]:
    """Content words shared by needle and question (NoLiMa's design goal: none)."""
    return content_words(case.needle, [case.answer]) & content_words(case.question, [case.answer])


def load_cases(
    source: str | Path = PROJECT_NEEDLE_SET,
    n: int | None = None,
    seed: int = 0,
    avoid_text: str = "",
) -> list[NeedleCase]:
    """``n`` seeded cases (all when None) of a needle set."""
    cases = expand_cases(read_needle_set(source), seed=seed, avoid_text=avoid_text)
    if n is None or n >= len(cases):
        return cases
    if n < 1:
        raise ParameterError(f"number of needle cases must be >= 1, got {n}")
    keep = sorted(random.Random(f"cases:{seed}").sample(range(len(cases)), n))
    return [cases[i] for i in keep]


def needle_set_summary(cases: Sequence[NeedleCase]):
    return (
        pd.DataFrame(
            [
                {"experiment": c.experiment, "reasoning": c.reasoning_type, "hop": c.hop}
                for c in cases
            ]
        )
        .value_counts()
        .rename("cases")
        .reset_index()
    )


# ---------------------------------------------------------------- haystack


def haystack_text() -> str:
    """The Paul Graham essays with hard line wraps joined and the paragraph breaks that the
    package copy glues together ("mistakes.If") restored, so sentences can be found."""
    text = paul_graham_essays()
    text = re.sub(r"(?<=[a-z0-9][.!?])(?=[A-Z])", "\n\n", text)
    # Essay dates: "April 2012A palliative ..."
    text = re.sub(r"(?<=\b(?:19|20)\d\d)(?=[A-Z])", "\n\n", text)
    text = re.sub(r"(?<!\n)\n(?!\n)", " ", text)
    return re.sub(r"[ \t]{2,}", " ", text)


def haystack_chunks(
    tokenizer,
    n_tokens: int,
    *,
    strategy: str = "sentence",
    max_chars: int = 500,
    text: str | None = None,
) -> list[str]:
    """The leading chunks of the haystack whose total is at most ``n_tokens`` of ``tokenizer``
    (chunks are counted one by one; each ends in whitespace, so the sum is the length of the
    joined text to within a token or two)."""
    if n_tokens < 1:
        raise ParameterError(f"haystack length must be >= 1 token, got {n_tokens}")
    text = haystack_text() if text is None else text
    chars = max(4000, 8 * n_tokens)
    while True:
        chunks = chunk_text(text[:chars], strategy, max_chars)
        counts = [len(ids) for ids in tokenizer(chunks, add_special_tokens=False).input_ids]
        if sum(counts[:-1]) >= n_tokens or chars >= len(text):
            break
        chars *= 2
    out, total = [], 0
    for chunk, count in zip(chunks[:-1] if chars < len(text) else chunks, counts):
        if total + count > n_tokens:
            break
        out.append(chunk)
        total += count
    if not out:
        raise ParameterError(
            f"a haystack of {n_tokens} tokens holds no whole chunk; use a longer length "
            f"or a smaller max_chars ({max_chars})"
        )
    return out


def place_needle(chunks: Sequence[str], needle: str, depth: float) -> tuple[list[str], int]:
    """The chunks with ``needle`` as its own chunk at the boundary nearest ``depth`` (0: first,
    1: last); returns the new list and the needle's index."""
    if not 0.0 <= depth <= 1.0:
        raise ParameterError(f"needle depth must be within [0, 1], got {depth}")
    k = round(depth * len(chunks))
    lead = " " if k > 0 and chunks[k - 1] and not chunks[k - 1][-1].isspace() else ""
    trail = " " if k < len(chunks) else ""
    return [*chunks[:k], f"{lead}{needle}{trail}", *chunks[k:]], k


# ---------------------------------------------------------------- prompts and requests


def build_prompt(case: NeedleCase, haystack: str, *, query_aware: bool = False) -> str:
    """Figure 3's user prompt (NoLiMa's template), or the needle set's own ``task_template``;
    ``query_aware`` also puts the question before the context."""
    if case.task_template and not query_aware:
        return case.task_template.format(haystack=haystack, question=case.question)
    name = "tag_needle_qa" + ("_with_query_aware_contextualization" if query_aware else "")
    return load_prompt(name).format(haystack=haystack, question=case.question)


@dataclass
class Taggers:
    """The taggers a request set may need, each with its cache."""

    spacy: object | None = None
    llm: object | None = None
    caches: dict = field(default_factory=dict)

    def tags(self, kind: str, chunks: Sequence[str]) -> list[list[str]]:
        tagger = getattr(self, kind)
        if tagger is None:
            raise ParameterError(f"variant needs the {kind} tagger; pass it in Taggers({kind}=...)")
        return tag_chunks(chunks, tagger, self.caches.setdefault(kind, TagCache()))


def make_requests(
    cases: Sequence[NeedleCase],
    *,
    tokenizer,
    lengths: Sequence[int],
    variants: Sequence[str],
    taggers: Taggers | None = None,
    depths: Sequence[float] = DEFAULT_DEPTHS,
    depth_mode: str = "rotate",
    query_aware_variants: Sequence[str] = (),
    query_aware_lengths: Sequence[int] = (),
    strategy: str = "sentence",
    max_chars: int = 500,
    text: str | None = None,
) -> list[Request]:
    """One request per (case, length, variant[, depth]).

    ``depth_mode``: ``rotate`` gives case *i* the depth ``depths[i % len(depths)]`` at every
    length and variant (all depths covered at the cost of one); ``all`` asks every case at
    every depth. ``query_aware_variants`` are asked again, at ``query_aware_lengths``, with
    the question also before the context. ``meta`` records the context's plain and tagged
    token counts, the needle's chunk index and the tags it got.
    """
    if depth_mode not in ("rotate", "all"):
        raise ParameterError(f"depth_mode must be rotate or all, got {depth_mode!r}")
    for v in [*variants, *query_aware_variants]:
        variant_parts(v)
    taggers = taggers or Taggers()
    haystacks = {
        int(n): haystack_chunks(
            tokenizer, int(n), strategy=strategy, max_chars=max_chars, text=text
        )
        for n in lengths
    }
    # Tag every distinct chunk up front: one batched pass per tagger instead of one per needle.
    every_chunk = [c for chunks in haystacks.values() for c in chunks] + [c.needle for c in cases]
    for kind in {VARIANTS[v][1] for v in [*variants, *query_aware_variants]} - {None}:
        taggers.tags(kind, every_chunk)
    out = []
    for length in lengths:
        chunks = haystacks[int(length)]
        for i, case in enumerate(cases):
            case_depths = depths if depth_mode == "all" else [depths[i % len(depths)]]
            for depth in case_depths:
                placed, at = place_needle(chunks, case.needle, float(depth))
                plain = "".join(placed).strip()
                plain_tokens = len(tokenizer(plain, add_special_tokens=False).input_ids)
                asked = [(v, False) for v in variants]
                if int(length) in [int(x) for x in query_aware_lengths]:
                    asked += [(v, True) for v in query_aware_variants]
                for variant, qac in asked:
                    out.append(
                        _variant_request(
                            case,
                            placed,
                            at,
                            (plain, plain_tokens),
                            variant,
                            qac,
                            (int(length), float(depth)),
                            taggers,
                            tokenizer,
                        )
                    )
    return out


def _variant_request(
    case: NeedleCase,
    placed: list[str],
    at: int,
    plain: tuple[str, int],
    variant: str,
    qac: bool,
    where: tuple[int, float],
    taggers: Taggers,
    tokenizer,
) -> Request:
    """One variant's request for a needle placed in a haystack: ``plain`` is the untagged
    context with its token count, ``where`` the haystack length and needle depth; tagged
    variants add the tags of ``taggers`` and record what they cost in ``meta``."""
    (context, plain_tokens), (length, depth) = plain, where
    _, tagger_kind, _ = VARIANTS[variant]
    meta = {
        "hop": case.hop,
        "experiment": case.experiment,
        "needle_chunk": at,
        "chunks": len(placed),
        "context_tokens": plain_tokens,
        "tag_tokens": 0,
        "needle_tags": [],
    }
    if tagger_kind:
        tags = taggers.tags(tagger_kind, placed)
        context = tagged_text(placed, tags).strip()
        meta.update(
            tag_tokens=len(tokenizer(context, add_special_tokens=False).input_ids) - plain_tokens,
            needle_tags=tags[at],
            tagged_chunks=sum(1 for t in tags if t),
        )
    condition = {
        "variant": variant,
        "length": length,
        "depth": depth,
        "query_aware": qac,
        "hop": case.hop,
        "tagger": _tagger_id(taggers, tagger_kind),
    }
    return Request(
        TASK,
        case.id,
        build_prompt(case, context, query_aware=qac),
        (case.answer,),
        condition,
        max_new_tokens=MAX_NEW_TOKENS,
        stop=StopRule(newline=True),
        meta=meta,
        system=case.system_prompt or system_prompt(variant),
    )


def _tagger_id(taggers: Taggers, kind: str | None) -> str:
    return "none" if kind is None else getattr(taggers, kind).id


# ---------------------------------------------------------------- scoring and tables


def score(row: dict) -> float:
    """One row's score: NoLiMa's contains for a needle question, the chosen letter for a
    NovelQA question."""
    if row["task"] == "novelqa":
        return float(parse_choice(row["output"]) == row["gold"][0])
    return nolima_contains(row["output"], row["gold"])


def needle_of(case_id: str) -> str:
    """The needle a case asks about: its one-hop and two-hop questions share the needle (and
    the haystack), so the needle, not the question, is the independent unit."""
    return case_id.rsplit("/", 1)[0]


def score_rows(rows: Sequence[dict]) -> list[dict]:
    """Flat rows with ``correct`` = NoLiMa's contains (gold name anywhere in the answer) and
    the ``needle`` each question asks about."""
    out = []
    for r in rows:
        c = r["condition"]
        out.append(
            {
                **c,
                "variant_label": VARIANT_LABELS.get(c["variant"], c["variant"]),
                "model": r["model"],
                "model_name": r["model"],
                "backend": row_backend(r),
                "key": r["key"],
                "condition_json": json.dumps(c, sort_keys=True),
                "example_id": r["example_id"],
                "needle": needle_of(r["example_id"]),
                "output": r["output"],
                "gold": r["gold"][0],
                "correct": nolima_contains(r["output"], r["gold"]),
                "prompt_tokens": r["prompt_tokens"],
                "context_tokens": r["meta"].get("context_tokens"),
                "tag_tokens": r["meta"].get("tag_tokens", 0),
                "needle_tagged": bool(r["meta"].get("needle_tags")),
                "longctx_version": r["longctx_version"],
                "device": r["params"].get("device"),
                "dtype": r["params"].get("dtype"),
                "seconds_per_prompt": r["seconds_per_prompt"],
            }
        )
    return out


COMPLEXITY = {
    "sh": "single-hop",
    "mh": "multi-hop",
    "dtl": "detail",
    "single-hop": "single-hop",
    "multi-hop": "multi-hop",
    "detail": "detail",
}


@dataclass(frozen=True)
class MCQuestion:
    """One NovelQA multiple-choice question."""

    id: str
    book: str
    question: str
    options: tuple[str, str, str, str]
    answer: str  # "A".."D"; "" when the file withholds it
    complexity: str = ""
    aspect: str = ""


def read_novelqa(root: str | Path) -> tuple[list[MCQuestion], dict[str, tuple[str, str]]]:
    """NovelQA's layout: ``Data/<collection>/<book id>.json`` (a list of questions with
    ``Question``, ``Options`` as a dict A-D or a list of 4, ``Complex`` sh/mh/dtl,
    ``Aspect``, ``QID`` and, where released, ``Answer``) and ``Books/<collection>/<book id>.txt``.
    An optional ``bookmeta.json`` maps book ids to ``{"title": ...}``. Returns the questions
    and ``{book id: (title, text)}``."""
    root = Path(root)
    data_files = sorted((root / "Data").glob("**/*.json"))
    if not data_files:
        raise DataFileError(f"{root}: no Data/<collection>/<book>.json files (NovelQA layout)")
    meta_path = root / "bookmeta.json"
    titles = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    questions, books = [], {}
    for path in data_files:
        book = path.stem
        book_path = root / "Books" / path.parent.name / f"{book}.txt"
        if not book_path.is_file():
            raise DataFileError(f"{path}: its book {book_path} is missing")
        title = (
            (titles.get(book) or {}).get("title", book)
            if isinstance(titles.get(book), dict)
            else book
        )
        books[book] = (title, book_path.read_text(encoding="utf-8"))
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(rows, dict):  # some releases key questions by id
                rows = [{"QID": k, **v} for k, v in rows.items()]
            for k, row in enumerate(rows):
                opts = row["Options"]
                options = tuple(opts[c] for c in "ABCD") if isinstance(opts, dict) else tuple(opts)
                if len(options) != 4:
                    raise ValueError(f"expected 4 options, got {len(options)}")
                answer = str(row.get("Answer", "")).strip().upper()[:1]
                questions.append(
                    MCQuestion(
                        str(row.get("QID", f"{book}-{k}")),
                        book,
                        row["Question"],
                        options,
                        answer if answer in "ABCD" else "",
                        COMPLEXITY.get(
                            str(row.get("Complex", "")).lower(), str(row.get("Complex", ""))
                        ),
                        str(row.get("Aspect", "")),
                    )
                )
        except (ValueError, KeyError, TypeError) as err:
            raise DataFileError(
                f"{path}: not a NovelQA question file ({type(err).__name__}: {err})"
            ) from None
    return questions, books


def truncate_to_tokens(text: str, tokenizer, n_tokens: int) -> str:
    """The longest prefix of ``text`` ending at a sentence end within ``n_tokens`` tokens
    (the paper truncated novels to the reader's window and dropped questions about the rest)."""
    ids = tokenizer(text, add_special_tokens=False).input_ids
    if len(ids) <= n_tokens:
        return text
    prefix = tokenizer.decode(ids[:n_tokens])
    cut = max(prefix.rfind(". "), prefix.rfind(".\n"))
    return prefix[: cut + 1] if cut > 0 else prefix


def novelqa_requests(
    questions: Sequence[MCQuestion],
    books: dict,
    *,
    tokenizer,
    variants: Sequence[str],
    max_book_tokens: int,
    taggers: Taggers | None = None,
    strategy: str = "paragraph",
    max_chars: int = 1500,
) -> list[Request]:
    """Figure 4's prompt per (question, variant), the book truncated to ``max_book_tokens``.
    Questions without a released answer are skipped (they cannot be scored)."""
    taggers = taggers or Taggers()
    out = []
    contexts: dict[tuple[str, str], str] = {}
    for q in questions:
        if not q.answer:
            continue
        title, text = books[q.book]
        for variant in variants:
            definitions, tagger_kind, _ = variant_parts(variant)
            key = (q.book, variant)
            if key not in contexts:
                content = truncate_to_tokens(text, tokenizer, max_book_tokens)
                if tagger_kind:
                    chunks = chunk_text(content, strategy, max_chars)
                    content = tagged_text(chunks, taggers.tags(tagger_kind, chunks))
                contexts[key] = content
            prompt = load_prompt("novelqa_mc").format(
                title=title,
                content=contexts[key],
                question=q.question,
                choice0=q.options[0],
                choice1=q.options[1],
                choice2=q.options[2],
                choice3=q.options[3],
            )
            cond = {
                "variant": variant,
                "complexity": q.complexity,
                "aspect": q.aspect,
                "max_book_tokens": max_book_tokens,
                "tagger": _tagger_id(taggers, tagger_kind),
            }
            out.append(
                Request(
                    "novelqa",
                    q.id,
                    prompt,
                    (q.answer,),
                    cond,
                    max_new_tokens=8,
                    stop=StopRule(newline=True, answer_pattern=r"\b[A-D]\b"),
                    meta={"book": q.book},
                    system=system_prompt(variant),
                )
            )
    return out


def parse_choice(output: str) -> str | None:
    """The first standalone option letter A-D (also inside ``<B>`` or ``B:``)."""
    m = re.search(r"(?<![A-Za-z])([A-D])(?![A-Za-z])", output)
    return m.group(1) if m else None


def score_novelqa(rows: Sequence[dict]) -> list[dict]:
    """Exact match of the chosen letter with the gold letter."""
    out = []
    for r in rows:
        choice = parse_choice(r["output"])
        out.append(
            {
                **r["condition"],
                "model": r["model"],
                "example_id": r["example_id"],
                "output": r["output"],
                "choice": choice,
                "correct": float(choice == r["gold"][0]),
            }
        )
    return out


# ---------------------------------------------------------------------------------------------
# Through transforms: an example in the transforms' terms, and its request


def to_example(case: NeedleCase, chunks: Sequence[str], length: int) -> Example:
    """A needle question for :mod:`longctx.transforms`, in a haystack of ``chunks`` (counted
    to ``length`` reader tokens): the needle first, then the chunks; ``Position`` with a
    depth puts it at the chunk boundary the chapter uses (nearest)."""
    items = (Item(case.needle, gold=True, kind="chunk"), *(Item(c, kind="chunk") for c in chunks))
    return Example(
        TASK,
        case.id,
        case.question,
        (case.answer,),
        items,
        fields={"length": int(length), "hop": case.hop},
        native=case,
    )


VARIANT_OF_TAGS = {
    "none": "baseline",
    "none+framing": "framing",
    "none+definitions": "td",
    "spacy+definitions": "td_tc_spacy",
    "llm+definitions": "td_tc_llm",
    "none+definitions:td_tc_system": "td_tc_system",
}


def render(example: Example) -> Request:
    """The needle chapter's prompt: chunks joined (the needle spaced from its neighbours),
    tagged when ``Tags`` ran, the case's own system prompt or the transforms'. Condition: the
    chapter's (variant, length, depth, query-aware, hop, tagger id)."""
    s, case = example.settings, example.native
    k = example.gold_index
    texts = [it.text for it in example.items]
    lead = " " if k > 0 and texts[k - 1] and not texts[k - 1][-1].isspace() else ""
    trail = " " if k < len(texts) - 1 else ""
    texts[k] = f"{lead}{texts[k]}{trail}"
    context = "".join(texts).strip()
    tags_label = s.get("tags", "none")
    variant = VARIANT_OF_TAGS.get(tags_label)
    if variant is None:
        raise ParameterError(f"the needle chapter has no variant for tags {tags_label!r}")
    cond = {
        "variant": variant,
        "length": example.fields["length"],
        "depth": float(s.get("position", 0.0)),
        "query_aware": bool(s.get("query_aware", False)),
        "hop": example.fields["hop"],
        "tagger": s.get("tagger") or "none",
    }
    prompt = build_prompt(case, context, query_aware=cond["query_aware"])
    prompt = fill_slots(
        prompt, (prompt.rfind(context), prompt.rfind(context) + len(context)), example
    )
    return Request(
        TASK,
        case.id,
        prompt,
        (case.answer,),
        cond,
        max_new_tokens=MAX_NEW_TOKENS,
        stop=StopRule(newline=True),
        system=case.system_prompt or system_of(example),
    )
