"""The tagging chapter's design: the requests a run asks, cut into blocks headline
first (what ``longctx reproduce`` and the cost plan read), and what they are built from."""

from __future__ import annotations

from pathlib import Path

from ...errors import ParameterError
from ...reader import Reader
from ...requests import dedupe_key
from ...runner import Block
from ...tagging import TAG_EXPERIMENT, SpacyTagger, spacy_cache, variant_parts
from ...tasks import tag_needles as tn
from .tagger import LLMTagger

EXPERIMENT = "tag_needles"


def cases_for(params: dict) -> tuple[str, list[tn.NeedleCase]]:
    """(haystack text, the first ``num_cases`` seeded needle questions)."""
    text = tn.haystack_text()
    return text, tn.load_cases(
        params["needle_set"], n=params["num_cases"], avoid_text=text, seed=params["seed"]
    )


def taggers_for(
    params: dict,
    results_dir: str | Path,
    *,
    tagger: Reader | None = None,
    load_tagger=None,
    batch_size: int = 8,
) -> tn.Taggers:
    """The taggers the variants need: spaCy, and the LLM tagger (``tagger``, by default
    ``params["tagger_model"]`` through hf), its answers stored as rows in its ``tags`` store
    under ``results_dir``, so it loads (through ``load_tagger``) only for a chunk with no row."""
    variants = (
        params["variants"]
        + params["query_aware_variants"]
        + list(params.get("long_variants") or [])
        + list(params.get("short_variants") or [])
    )
    kinds = {variant_parts(v)[1] for v in variants}
    taggers = tn.Taggers()
    if "spacy" in kinds:  # its tags kept in the user's cache
        taggers.spacy = SpacyTagger()
        taggers.caches["spacy"] = spacy_cache()
    if "llm" in kinds:  # the privileged categories, answers stored as the tagger's rows
        taggers.llm = LLMTagger(
            tagger or Reader(params["tagger_model"]),
            "privileged",
            results_dir=results_dir,
            method=params["llm_tag_method"],
            load=load_tagger,
            batch_size=batch_size,
        )
    return taggers


def requests_for(
    params: dict, *, tokenizer, taggers: tn.Taggers, cases=None, text=None, lengths=None
):
    if cases is None:
        text, cases = cases_for(params)
    return tn.make_requests(
        cases,
        tokenizer=tokenizer,
        lengths=lengths or params["lengths"],
        variants=params["variants"],
        taggers=taggers,
        depths=params["depths"],
        depth_mode=params["depth_mode"],
        query_aware_variants=params["query_aware_variants"],
        query_aware_lengths=params["query_aware_lengths"],
        strategy=params["chunk_strategy"],
        max_chars=params["chunk_chars"],
        text=text,
    )


def long_cases(params: dict, text: str) -> list[tn.NeedleCase]:
    """Every case (or the first ``long_num_cases`` seeded ones) of each ``long_needle_sets``
    set, in set order; case ids differ across the shipped sets."""
    out = []
    for source in params["long_needle_sets"]:
        out += tn.load_cases(
            source, n=params["long_num_cases"], avoid_text=text, seed=params["seed"]
        )
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise ParameterError(
            f"needle sets {params['long_needle_sets']} share case ids; pairing needs distinct ids"
        )
    return out


def _every_case_at(params: dict, length, variants, *, tokenizer, taggers: tn.Taggers, text: str):
    """Every :func:`long_cases` case at ``length`` tokens in ``variants``, each case at one
    rotating depth (:func:`sized_depths`); none when ``length`` is null."""
    if not length:
        return []
    return tn.make_requests(
        long_cases(params, text),
        tokenizer=tokenizer,
        lengths=[length],
        variants=variants,
        taggers=taggers,
        depths=params["depths"],
        depth_mode="rotate",
        strategy=params["chunk_strategy"],
        max_chars=params["chunk_chars"],
        text=text,
    )


def long_requests(params: dict, *, tokenizer, taggers: tn.Taggers, text: str):
    """The headline pair at ``long_length`` tokens (none when it is null)."""
    return _every_case_at(
        params,
        params.get("long_length"),
        params["long_variants"],
        tokenizer=tokenizer,
        taggers=taggers,
        text=text,
    )


def short_requests(params: dict, *, tokenizer, taggers: tn.Taggers, text: str):
    """The paper's short-context comparisons, ``short_variants`` at ``short_length`` tokens,
    on the headline's cases (none when ``short_length`` is null). The grid asks the same
    length on ``num_cases`` cases, too few to size a paired change."""
    return _every_case_at(
        params,
        params.get("short_length"),
        params.get("short_variants") or [],
        tokenizer=tokenizer,
        taggers=taggers,
        text=text,
    )


class _ChunkRecorder:
    """Stands in for the LLM tagger while the plan finds the chunks it must tag: records
    each chunk it is asked for and tags none (no prompt it helps build is kept)."""

    id = "chunks-to-tag"

    def __init__(self):
        self.asked: dict[str, None] = {}  # in the order asked, each once

    @property
    def chunks(self) -> list[str]:
        return list(self.asked)

    def tag_with_raw(self, chunks):
        self.asked.update(dict.fromkeys(chunks))
        return [[] for _ in chunks], ["" for _ in chunks]


def uses_llm_tags(request) -> bool:
    """Whether ``request``'s prompt carries the LLM tagger's tags."""
    return variant_parts(request.condition["variant"])[1] == "llm"


def blocks(params: dict, tokenizer, results_dir: str | Path) -> list[Block]:
    """The chapter's blocks, haystacks counted in ``tokenizer``'s tokens. Where a variant
    carries the LLM tagger's tags, its prompts cannot be written before the tags exist: the
    plan asks the tagger (``params["tagger_model"]``) for every chunk those prompts tag, in a
    block of its own answered by the tagger into its ``tags`` store, and that block's second
    stage builds the tagged prompts from the stored tags. Every other prompt is planned at
    once, headline blocks first."""
    text, cases = cases_for(params)
    recorder = _ChunkRecorder()
    taggers = taggers_for(params, results_dir)
    if taggers.llm is not None:
        tagger, taggers.llm = taggers.llm, recorder
    planned = _grid_blocks(
        params, tokenizer, taggers, text, cases, keep=lambda r: not uses_llm_tags(r)
    )
    if not recorder.chunks:
        return planned
    asked = [r for method in tagger.methods for r in tagger.requests(method, recorder.chunks)]

    def tagged(rows: list[dict]) -> list[Block]:
        if len(rows) < len(asked):  # a prompt tagged from part of its chunks is another prompt
            return []
        taggers.llm = tagger  # the stand-in's work is done; spaCy's tags are reused
        return _grid_blocks(
            params, tokenizer, taggers, text, cases, keep=uses_llm_tags, named=", LLM tags"
        )

    return [
        *planned,
        Block(
            f"LLM tags from {tagger.reader.label}: {len(recorder.chunks)} chunks",
            TAG_EXPERIMENT,
            asked,
            followup=tagged,
            followup_experiment=EXPERIMENT,
            reader=tagger.reader,
        ),
    ]


def _grid_blocks(
    params: dict, tokenizer, taggers, text: str, cases, *, keep, named: str = ""
) -> list[Block]:
    """The chapter's prompts that ``keep`` keeps, in blocks: the headline pair at
    ``long_length``, the short comparisons, the grid at its longest length, the rest;
    ``named`` ends each block's name."""
    longest = max(params["lengths"], default=None)  # the claims scale runs no grid

    def kept(requests) -> list:
        return [r for r in requests if keep(r)]

    headline = kept(long_requests(params, tokenizer=tokenizer, taggers=taggers, text=text))
    short = kept(short_requests(params, tokenizer=tokenizer, taggers=taggers, text=text))
    # A grid case at the short length and its rotating depth is a sized request already.
    sized = {dedupe_key(r) for r in [*headline, *short]}
    every = [
        r
        for r in requests_for(params, tokenizer=tokenizer, taggers=taggers, cases=cases, text=text)
        if dedupe_key(r) not in sized and keep(r)
    ]
    head = [r for r in every if r.condition["length"] == longest and not r.condition["query_aware"]]
    rest = [r for r in every if r.condition["length"] != longest or r.condition["query_aware"]]
    named_blocks = [
        (
            f"{params['long_length']} tokens, {' vs '.join(params['long_variants'])}",
            headline,
            True,
        ),
        (
            f"{params['short_length']} tokens on every case, {' vs '.join(params['short_variants'])}",
            short,
            True,
        ),
        (
            f"{longest} tokens, every variant",
            head,
            not (params.get("long_length") and params["long_variants"]),
        ),
        ("other lengths and query-aware prompts", rest, False),
    ]
    return [
        Block(name + named, EXPERIMENT, requests, headline)
        for name, requests, headline in named_blocks
        if requests
    ]


# The stores the chapter offers for download
EXPERIMENTS = (EXPERIMENT, TAG_EXPERIMENT)

# Each claim -> the words naming the claims-scale blocks its rows come from (the chapter's
# claim_blocks: what `longctx reproduce --scale claims` runs for it).
CLAIM_BLOCKS = {
    "tag-td": ("tokens on every case",),
    "tag-td-definitions": ("tokens on every case",),
    "tag-spacy": ("tokens on every case",),
    "tag-spacy-long": ("tokens, baseline vs",),
    "tag-spacy-tags": ("tokens on every case",),
    "tag-spacy-tags-long": ("tokens, baseline vs",),
}
