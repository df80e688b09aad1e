"""One interface for the papers' context manipulations.

A :class:`Example` is a task instance in structured form: the ordered context items (one
marked gold), the ranked pool of items that could compete with it, the question and the
gold answers. A :class:`Transform` takes an example and returns a new one; transforms are
frozen dataclasses whose fields are their declared parameters, deterministic (every random
choice is seeded from the transform's ``seed`` and the example id) and composable in order:

>>> ex = qa.to_example(question)                         # doctest: +SKIP
>>> request = tasks.render(apply(ex, [Competitors(9), Normalize(":", 0.5, seed=0), Position(0.5)]))

The manipulations, with the paper each comes from:

=====================  ===========================================================
``Competitors``        which distractors compete with the gold item: the top of the
                       ranking (``hard``), a seeded draw from its far part (``far``),
                       or a uniform draw (``random``); semantic competition, Lost in
                       the Middle (retrieved vs random distractors)
``Shuffle``            seeded order of the candidates or of the chosen distractors
``Position``           the gold item's place: a relative depth or a 1-based index
                       (Lost in the Middle)
``Normalize``          C-NORM: a fraction of each passage's sentences rewritten with
                       a delimiter (C-NORM, section 4)
``IdFormat``           key-value ids written as UUID / plain / other delimiters
                       (C-NORM, section 3)
``Tags``               XML tags around tagged chunks, with or without the tag
                       definitions in the system prompt (TAG)
``Padding``            essay / whitespace / token / masked filler between the context
                       and the question, or before the context (context length alone)
``QueryAware``         the question also before the context (Lost in the Middle)
``Instruction``        a prompt file's instruction on where to look, before the
                       context (Attention Instruction)
``Arrange``            every item, gold included, reordered: shuffled, or by scores
                       at the edges, ascending or descending (the fixes for a lost
                       middle and their random-shuffle control)
``ClosedBook``         no context at all (Lost in the Middle's closed-book baseline)
=====================  ===========================================================

A transform changes the items, or writes text into one of the example's prompt *slots*
(:data:`SLOTS`: the system message, text right before the context, text right after it),
or records a setting. Rendering is each task's own (:func:`longctx.tasks.render` finds the
task's ``render``): it builds the task's prompt, says where its context lies, and
:func:`fill_slots` puts the slots' text there, so a transform that adds text to the prompt
touches no renderer. The condition a renderer records is the task's established one (so
rebuilding a committed chapter through transforms gives the same store keys, which a test
checks for every committed row) plus :func:`recorded_fields`, one field per transform the
chapters never used (``tags``, ``filler`` ...), so new combinations get new keys and old
ones keep theirs.

Adding a manipulation means adding one transform (see ``book/methods.md``): subclass
:class:`Transform`, declare parameters as fields, implement :meth:`Transform.apply`, and
register it with :func:`register`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import ClassVar

from .errors import ParameterError
from .formats import check_delimiter, format_identifier, format_passages
from .padding import filler_slot
from .prompts import load_prompt
from .tagging import (
    SpacyTagger,
    chunk_text,
    spacy_cache,
    system_prompt,
    tag_chunks,
    tagged_text,
)

# ---------------------------------------------------------------------------------------------
# Examples

SLOTS = ("system", "before_context", "after_context")


@dataclass(frozen=True)
class Item:
    """One context item: a document (``title``, ``text``), a key-value pair (``title`` is the
    key, ``text`` the value) or a snippet / chunk."""

    text: str
    title: str = ""
    gold: bool = False
    kind: str = "document"


@dataclass(frozen=True)
class Example:
    """A task instance. ``items`` is the context in order; ``candidates`` the competitors not
    (yet) in it, most relevant first under ``ranking``; ``fields`` are condition fields fixed
    by where the example came from; ``settings`` what the transforms applied so far set."""

    task: str
    example_id: str
    question: str
    answers: tuple[str, ...]
    items: tuple[Item, ...]
    candidates: tuple[Item, ...] = ()
    ranking: str = ""
    fields: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    native: object = field(default=None, compare=False, repr=False)  # the task module's own example
    slots: dict = field(default_factory=dict)  # slot name -> texts written into it, in order

    @property
    def gold_index(self) -> int | None:
        idx = [i for i, it in enumerate(self.items) if it.gold]
        if len(idx) > 1:
            raise ParameterError(f"example {self.example_id} has {len(idx)} gold items")
        return idx[0] if idx else None

    @property
    def gold(self) -> Item:
        idx = self.gold_index
        if idx is None:
            raise ParameterError(f"example {self.example_id} has no gold item in its context")
        return self.items[idx]

    def set(self, **settings) -> Example:
        return replace(self, settings={**self.settings, **settings})

    def write(self, slot: str, text: str) -> Example:
        """Add ``text`` to a prompt slot (:data:`SLOTS`); the task's renderer puts it in place."""
        if slot not in SLOTS:
            raise ParameterError(f"unknown prompt slot {slot!r}; use one of {', '.join(SLOTS)}")
        return replace(self, slots={**self.slots, slot: (*self.slots.get(slot, ()), text)})


# ---------------------------------------------------------------------------------------------
# Transforms


class Transform:
    """Base class: subclasses are frozen dataclasses; their fields are the parameters."""

    name: ClassVar[str] = ""
    records: ClassVar[tuple[str, ...]] = ()  # settings a new transform adds to the condition

    def apply(self, example: Example) -> Example:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, example: Example) -> Example:
        return self.apply(example)

    @classmethod
    def parameters(cls) -> dict[str, object]:
        """Declared parameters and their defaults (``...`` when required)."""
        return {f.name: (... if f.default is MISSING else f.default) for f in fields(cls)}


TRANSFORMS: dict[str, type[Transform]] = {}
RECORDED: list[
    str
] = []  # settings of registered transforms that every renderer puts in the condition


def register(cls: type[Transform]) -> type[Transform]:
    """Make a transform buildable by name (:func:`make`); the settings it lists in
    ``records`` go into every rendered request's condition, so its rows get their own keys."""
    if not cls.name or cls.name in TRANSFORMS:
        raise ParameterError(f"transform {cls.__name__} needs a unique name, got {cls.name!r}")
    TRANSFORMS[cls.name] = cls
    RECORDED.extend(k for k in cls.records if k not in RECORDED)
    return cls


def make(name: str, **params) -> Transform:
    """A transform from data: ``make("position", at=0.5)``; unknown names or parameters are
    one-line errors that list what exists."""
    if name not in TRANSFORMS:
        raise ParameterError(f"unknown transform '{name}'; known: {', '.join(sorted(TRANSFORMS))}")
    cls = TRANSFORMS[name]
    unknown = set(params) - set(cls.parameters())
    if unknown:
        raise ParameterError(
            f"transform '{name}' has no parameter {sorted(unknown)}; "
            f"its parameters: {cls.parameters()}"
        )
    return cls(**params)


def apply(example: Example, transforms: Sequence[Transform]) -> Example:
    for t in transforms:
        example = t.apply(example)
    return example


def _rng(*parts) -> random.Random:
    return random.Random(":".join(str(p) for p in parts))


@register
@dataclass(frozen=True)
class Competitors(Transform):
    """Add ``count`` candidates to the context, after the items already there.

    * ``hard``: the first ``count`` in ranking order (retrieved distractors; BM25 hard
      negatives);
    * ``far``: a seeded draw of ``count`` from the candidates ranked at or beyond
      max(``min_rank``, ``far_from`` x number of candidates), in draw order (the
      semantic-competition paper's far-rank control: as many items, as long, but not
      competing); the first k of a draw do not depend on ``count``, so sizes nest;
    * ``random``: a seeded uniform draw (Lost in the Middle, appendix B).

    Two in a row mix kinds (semantic competition's matched control: 4 hard, then 15 far).
    ``Position`` or ``Scatter`` then places the gold item.
    """

    count: int
    kind: str = "hard"
    far_from: float = 0.5
    min_rank: int = 0
    seed: int = 0
    name: ClassVar[str] = "competitors"

    def apply(self, example: Example) -> Example:
        if self.kind not in ("hard", "far", "random"):
            raise ParameterError(f"competitors kind must be hard, far or random, got {self.kind!r}")
        if not isinstance(self.count, int) or self.count < 0:
            raise ParameterError(
                f"competitors count must be a non-negative integer, got {self.count!r}"
            )
        pool = list(example.candidates)
        if self.kind == "hard":
            start, order = 0, list(range(len(pool)))
        else:
            if not 0.0 <= self.far_from < 1.0:
                raise ParameterError(f"far_from must be in [0, 1), got {self.far_from}")
            start = max(self.min_rank, int(self.far_from * len(pool))) if self.kind == "far" else 0
            order = list(range(start, len(pool)))
            _rng(self.seed, self.kind, example.example_id).shuffle(order)
        if len(order) < self.count:
            raise ParameterError(
                f"example {example.example_id} has {len(order)} {self.kind} candidates "
                f"(from rank {start}), {self.count} requested; attach a larger pool"
            )
        chosen = [pool[i] for i in order[: self.count]]
        counts = dict(example.settings.get("competitor_counts", {}))
        counts[self.kind] = counts.get(self.kind, 0) + self.count
        settings = {
            "competitors": "+".join(k for k in ("hard", "far", "random") if counts.get(k))
            or "none",
            "competitor_counts": counts,
        }
        if self.kind != "hard":
            settings.update(competitor_seed=self.seed, competitor_ranks=[start, len(pool)])
        if self.kind == "far":
            settings["far_from"] = self.far_from
        return replace(example, items=(*example.items, *chosen)).set(**settings)


@register
@dataclass(frozen=True)
class Shuffle(Transform):
    """A seeded order. ``of="candidates"`` shuffles the pool before ``Competitors`` picks
    from it (Lost in the Middle's randomly ordered distractors, appendix C; ``mention``
    adds its "ordered randomly" instruction); ``of="distractors"`` shuffles the non-gold
    items already in the context (C-NORM's permuted setting). The random streams are the
    chapters' own (``stream``), so their prompts are unchanged."""

    seed: int = 0
    of: str = "distractors"
    mention: bool = False
    stream: str = ""
    name: ClassVar[str] = "shuffle"

    def apply(self, example: Example) -> Example:
        if self.of == "candidates":
            pool = list(example.candidates)
            random.Random(f"{self.stream or 'shuffle'}:{self.seed}:{example.example_id}").shuffle(
                pool
            )
            return replace(example, candidates=tuple(pool)).set(random_order=self.mention)
        if self.of != "distractors":
            raise ParameterError(f"shuffle of must be candidates or distractors, got {self.of!r}")
        if self.mention:
            raise ParameterError(
                "the ordered-randomly instruction goes with of='candidates' (as in the paper)"
            )
        rest = [it for it in example.items if not it.gold]
        random.Random(f"{self.stream or 'cnorm-order'}:{self.seed}:{example.example_id}").shuffle(
            rest
        )
        gold = example.gold_index
        # Position places the gold item
        items = rest if gold is None else [example.items[gold], *rest]
        return replace(example, items=tuple(items)).set(order_seed=self.seed)


def edges_order(scores: Sequence[float]) -> list[int]:
    """Indices of items scored ``scores`` (higher: more relevant) arranged with the most
    relevant at both ends and the least in the middle: LangChain's ``LongContextReorder``
    (Haystack's ``LostInTheMiddleRanker`` does the same), which takes the items best first,
    reverses them and lays them out alternately at the front and the back. The best item
    ends last, the second best first; ties keep the items' order."""
    best_first = sorted(range(len(scores)), key=lambda i: -scores[i])
    out: list[int] = []
    for k, i in enumerate(reversed(best_first)):
        if k % 2 == 1:
            out.append(i)
        else:
            out.insert(0, i)
    return out


ARRANGEMENTS = ("shuffle", "edges", "ascending", "descending")


@register
@dataclass(frozen=True)
class Arrange(Transform):
    """Every context item, gold included, in an order a fix for a lost middle computes:

    * ``shuffle``: a seeded random order (Cuconasu et al.'s control for any reordering);
    * ``edges``: by ``scores`` (higher: more relevant) at both ends, the least relevant in
      the middle (:func:`edges_order`: LangChain's and Haystack's reorderings);
    * ``ascending``: by ascending ``scores``, the highest last, beside the question
      (attention sorting; Found in the Middle's re-ranking where a reader reads the last
      position best);
    * ``descending``: the highest first.

    ``scores`` has one number per item in the context's current order (BM25 against the
    question, attention mass, calibrated attention); ``label`` names them in the
    condition (``arrangement``), so each fix's prompts have keys of their own, and the
    condition keeps where the gold item stood before (``arranged_from``), which pairs the
    arranged prompt with the one it was made from. Ties keep the current order."""

    rule: str
    scores: tuple[float, ...] = ()
    seed: int = 0
    label: str = ""
    name: ClassVar[str] = "arrange"
    records: ClassVar[tuple[str, ...]] = ("arrangement", "arranged_from")

    def order(self, example: Example) -> list[int]:
        """The new order, as indices into ``example.items``."""
        n = len(example.items)
        if self.rule not in ARRANGEMENTS:
            raise ParameterError(
                f"unknown arrangement {self.rule!r}; use one of {', '.join(ARRANGEMENTS)}"
            )
        if self.rule == "shuffle":
            order = list(range(n))
            _rng("arrange", self.seed, example.example_id).shuffle(order)
            return order
        if len(self.scores) != n:
            raise ParameterError(
                f"arrangement {self.rule!r} of example {example.example_id} has "
                f"{len(self.scores)} scores for {n} items"
            )
        if self.rule == "edges":
            return edges_order(self.scores)
        sign = 1 if self.rule == "ascending" else -1
        return sorted(range(n), key=lambda i: sign * self.scores[i])

    def apply(self, example: Example) -> Example:
        items = tuple(example.items[i] for i in self.order(example))
        label = self.rule if self.rule == "shuffle" else f"{self.rule} by {self.label or 'score'}"
        return replace(example, items=items).set(
            arrangement=label, arranged_from=example.gold_index
        )


@register
@dataclass(frozen=True)
class Position(Transform):
    """Move the gold item: ``at`` a float depth in [0, 1] (0 first, 1 last) or an int
    1-based position; the other items keep their order.

    Depths map to indices the way each paper's code does, which differ: documents round
    *down* (``int(d * (n - 1))``: Lost in the Middle's 10/20/30-document middles 4, 9, 14),
    key-value pairs and haystack chunks round to the *nearest* index. ``rounding`` (``floor`` / ``nearest``)
    overrides the item kind's convention."""

    at: float | int
    rounding: str = ""
    name: ClassVar[str] = "position"

    def index(self, n: int, kind: str) -> int:
        rounding = self.rounding or ("nearest" if kind in ("pair", "chunk") else "floor")
        if rounding not in ("floor", "nearest"):
            raise ParameterError(f"rounding must be floor or nearest, got {self.rounding!r}")
        if isinstance(self.at, bool):
            raise ParameterError(f"position {self.at!r} is not a number")
        if isinstance(self.at, int):
            if not 1 <= self.at <= n:
                raise ParameterError(f"position {self.at} outside 1..{n}")
            return self.at - 1
        if isinstance(self.at, float) and 0.0 <= self.at <= 1.0:
            return int(self.at * (n - 1)) if rounding == "floor" else round(self.at * (n - 1))
        raise ParameterError(
            f"position {self.at!r}: use a float depth in [0, 1] or an int position 1..{n}"
        )

    def apply(self, example: Example) -> Example:
        gold = example.gold
        idx = self.index(len(example.items), gold.kind)
        rest = [it for it in example.items if not it.gold]
        rest.insert(idx, gold)
        return replace(example, items=tuple(rest)).set(position=self.at)


@register
@dataclass(frozen=True)
class Scatter(Transform):
    """A seeded random gold position *and* distractor order from one stream (the semantic
    competition chapter's contexts): the gold index is drawn first, so two contexts of the
    same size (hard vs far) put the gold item at the same place."""

    seed: int = 0
    name: ClassVar[str] = "scatter"

    def apply(self, example: Example) -> Example:
        gold = example.gold
        rest = [it for it in example.items if not it.gold]
        rng = random.Random(f"{self.seed}:context:{example.example_id}:{len(example.items)}")
        at = rng.randrange(len(example.items))
        rng.shuffle(rest)
        rest.insert(at, gold)
        return replace(example, items=tuple(rest)).set(scatter_seed=self.seed)


@register
@dataclass(frozen=True)
class Normalize(Transform):
    """C-NORM: in every context passage (and candidate), a seeded fraction ``ratio`` of the
    sentences get ``delimiter`` in place of spaces; ``"none"`` leaves them as they are (the
    baseline). Titles, question and answers are untouched. Each passage's choice is seeded
    by ``seed`` and the passage, so it is formatted alike wherever it appears. ``label``
    names the arm in tables (C-NORM, baseline, shortest tokenization ...)."""

    delimiter: str
    ratio: float = 0.5
    seed: int = 0
    label: str = ""
    name: ClassVar[str] = "normalize"

    def apply(self, example: Example) -> Example:
        delimiter = None if self.delimiter in ("none", None) else self.delimiter
        label = self.label or ("baseline" if delimiter is None else "C-NORM")
        out = example.set(
            method=label,
            delimiter=delimiter or "none",
            ratio=self.ratio if delimiter else 0.0,
            format_seed=self.seed,
        )
        if delimiter is None:
            return out

        def fmt(items):
            texts = format_passages(
                [it.text for it in items],
                delimiter,
                self.ratio,
                self.seed,
                ids=[f"{it.title}|{it.text[:64]}" for it in items],
            )
            return tuple(replace(it, text=t) for it, t in zip(items, texts))

        return replace(out, items=fmt(example.items), candidates=fmt(example.candidates))


@register
@dataclass(frozen=True)
class IdFormat(Transform):
    """Key-value ids (keys and values) re-laid out with ``delimiter``: ``-`` UUID, ``""``
    plain hex, ``&`` modified UUID (C-NORM, Figure 2)."""

    delimiter: str
    name: ClassVar[str] = "id_format"

    def apply(self, example: Example) -> Example:
        check_delimiter(self.delimiter)

        def fmt(it: Item) -> Item:
            if it.kind != "pair":
                raise ParameterError(
                    "id_format applies to key-value pairs; use normalize for passages"
                )
            return replace(
                it,
                title=format_identifier(it.title, self.delimiter),
                text=format_identifier(it.text, self.delimiter),
            )

        answers = tuple(format_identifier(a, self.delimiter) for a in example.answers)
        question = format_identifier(example.question, self.delimiter)
        return replace(
            example,
            items=tuple(fmt(i) for i in example.items),
            candidates=tuple(fmt(i) for i in example.candidates),
            answers=answers,
            question=question,
        ).set(delimiter=self.delimiter)


_TAGGERS: dict[str, tuple[object, object]] = {}


def register_tagger(name: str, tagger, cache=None) -> None:
    """Make ``Tags(tagger=name)`` use ``tagger`` (anything with ``id`` and ``tag_with_raw``,
    e.g. :class:`longctx.chapters.tag_needles.tagger.LLMTagger`) and its :class:`~longctx.tagging.TagCache`."""
    _TAGGERS[name] = (tagger, cache)


def tagger_for(name: str):
    """(tagger, cache) behind ``Tags(tagger=name)``: ``spacy`` (en_core_web_sm entities,
    built once), or one registered with :func:`register_tagger`."""
    if name not in _TAGGERS:
        if name != "spacy":
            raise ParameterError(
                f"unknown tagger '{name}'; use spacy or register one with register_tagger"
            )
        _TAGGERS["spacy"] = (SpacyTagger(), spacy_cache())
    return _TAGGERS[name]


@register
@dataclass(frozen=True)
class Tags(Transform):
    """TAG: each context item's text is cut into chunks (sentences packed up to
    ``chunk_chars``; 0 tags each item whole, as the needle chapter's haystack chunks are),
    each chunk tagged by ``tagger`` and wrapped in its XML tags. ``definitions`` writes the
    tag definitions into the system slot (TD+TC: spaCy's categories for the spaCy tagger,
    the paper's privileged ones otherwise); ``tagger=""`` with definitions is TD alone
    (definitions, untagged context). ``framing`` without definitions or tagger writes TD's
    system message without the definitions: the control arm for TD, since any system
    message replaces the chat template's default one. ``message`` names the TAG variant
    whose system message the definitions come in (default: the one the tagger implies);
    ``Tags("", message="td_tc_system")`` is TD+TC's message over an untagged context, the
    control arm for the tags themselves."""

    tagger: str = "spacy"
    definitions: bool = True
    chunk_chars: int = 500
    framing: bool = False
    message: str = ""
    name: ClassVar[str] = "tags"

    def apply(self, example: Example) -> Example:
        if self.framing:
            if self.tagger or self.definitions:
                raise ParameterError("framing is TD's message alone: no tagger, no definitions")
            example = example.write("system", system_prompt("framing"))
            return example.set(tags="none+framing", tag_definitions=False, tagger="")
        label = (self.tagger or "none") + ("+definitions" if self.definitions else "")
        label += f":{self.message}" if self.message else ""
        if self.definitions:
            variant = self.message or (
                "td"
                if not self.tagger
                else "td_tc_spacy"
                if self.tagger == "spacy"
                else "td_tc_llm"
            )
            example = example.write("system", system_prompt(variant))
        if not self.tagger:
            if not self.definitions:
                raise ParameterError("tags with no tagger and no definitions change nothing")
            return example.set(tags=label, tag_definitions=True, tagger="")
        tagger, cache = tagger_for(self.tagger)

        if self.chunk_chars:

            def tag(it: Item) -> Item:
                chunks = chunk_text(it.text, "sentence", self.chunk_chars)
                lead = it.text[: len(it.text) - len(it.text.lstrip())]
                return replace(
                    it, text=lead + tagged_text(chunks, tag_chunks(chunks, tagger, cache)).strip()
                )

            items = tuple(tag(i) for i in example.items)
        else:
            tags = tag_chunks([it.text for it in example.items], tagger, cache)
            items = tuple(
                replace(it, text=tagged_text([it.text], [t])) for it, t in zip(example.items, tags)
            )
            example = example.set(item_tags=[list(t) for t in tags])
        return replace(example, items=items).set(
            tags=label, tag_definitions=self.definitions, tagger=getattr(tagger, "id", self.tagger)
        )


@register
@dataclass(frozen=True)
class Padding(Transform):
    """Context-length-alone filler: ``tokens`` of ``kind`` (essay, whitespace,
    space_tokens, newline_tokens, mask) ``between`` the context and the question or
    ``before`` the context. The prompt carries a placeholder the engine expands in the
    reading model's own tokens (so the length is the same for every model), written into
    the slot after (or before) the context."""

    kind: str = "whitespace"
    tokens: int = 0
    placement: str = "between"
    name: ClassVar[str] = "padding"

    def apply(self, example: Example) -> Example:
        if self.placement not in ("between", "before"):
            raise ParameterError(
                f"padding placement must be between or before, got {self.placement!r}"
            )
        slot = filler_slot(self.kind, self.tokens)  # validates kind and length
        if self.tokens:
            example = example.write(
                "after_context" if self.placement == "between" else "before_context", slot
            )
        return example.set(filler=self.kind, filler_tokens=self.tokens, placement=self.placement)


@register
@dataclass(frozen=True)
class QueryAware(Transform):
    """The question also before the context (Lost in the Middle, section 4.2)."""

    on: bool = True
    name: ClassVar[str] = "query_aware"

    def apply(self, example: Example) -> Example:
        return example.set(query_aware=self.on)


@register
@dataclass(frozen=True)
class Instruction(Transform):
    """A prompt file's text (:func:`longctx.prompts.load_prompt`) written into a prompt
    ``slot``: an instruction on where to look (Zhang et al., 2024, "Attention Instruction"),
    before the context by default. The condition records the file's name."""

    prompt: str
    slot: str = "before_context"
    name: ClassVar[str] = "instruction"
    records: ClassVar[tuple[str, ...]] = ("instruction",)

    def apply(self, example: Example) -> Example:
        try:
            text = load_prompt(self.prompt)
        except KeyError as err:
            raise ParameterError(str(err.args[0])) from None
        return example.write(self.slot, text).set(instruction=self.prompt)


@register
@dataclass(frozen=True)
class ClosedBook(Transform):
    """No context: the question alone (Lost in the Middle's closed-book baseline)."""

    name: ClassVar[str] = "closed_book"

    def apply(self, example: Example) -> Example:
        return replace(example, items=()).set(closed_book=True)


# ---------------------------------------------------------------------------------------------
# What every task's renderer shares


def recorded_fields(example: Example) -> dict:
    """Condition fields of transforms no committed chapter used (absent when unused, so the
    chapters' keys are unchanged)."""
    s = example.settings
    out = {}
    if "tags" in s:
        out["tags"] = s["tags"]
    if s.get("filler_tokens"):
        out.update(filler=s["filler"], filler_tokens=s["filler_tokens"], placement=s["placement"])
    counts = s.get("competitor_counts", {})
    if counts.get("far") or counts.get("random"):
        out.update(
            competitors=s["competitors"],
            competitor_counts=counts,
            competitor_seed=s["competitor_seed"],
        )
        if counts.get("far"):
            out["far_from"] = s["far_from"]
    out.update({k: s[k] for k in RECORDED if k in s})
    return out


def system_of(example: Example) -> str | None:
    """The system message the transforms wrote (None keeps the chat template's default)."""
    texts = example.slots.get("system", ())
    return "\n\n".join(texts) if texts else None


def fill_slots(prompt: str, context: tuple[int, int], example: Example) -> str:
    """``prompt`` with the context slots' text put around its context, ``prompt[start:end]``:
    each ``before_context`` text on its own line right before it, each ``after_context`` text
    on its own line right after it (between the context and the question)."""
    before, after = example.slots.get("before_context", ()), example.slots.get("after_context", ())
    if not before and not after:
        return prompt
    start, end = context
    if start < 0 or end <= start:
        raise ParameterError("text around the context needs a context (this prompt has none)")
    return (
        prompt[:start]
        + "".join(t + "\n" for t in before)
        + prompt[start:end]
        + "".join("\n" + t for t in after)
        + prompt[end:]
    )


def span_of(prompt: str, block: str) -> tuple[int, int]:
    """Where ``block`` (the rendered context) sits in ``prompt``: its last occurrence."""
    at = prompt.rfind(block) if block else -1
    return at, at + len(block)
