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


class _TagsNotCached(Exception):
    """A dry run reached a chunk the LLM tagger has not tagged yet."""


def blocks(
    params: dict, tokenizer, results_dir: str | Path, *, dry_run: bool = False
) -> list[Block]:
    """The chapter's blocks, haystacks counted in ``tokenizer``'s tokens. With ``dry_run``
    (findings, ``longctx reproduce --dry-run``) the LLM tagger is never loaded: when a
    chunk's tags are not cached, the plan is one empty block that says so, since those
    prompts cannot be written without them."""
    if dry_run:

        def refuse():
            raise _TagsNotCached

        try:
            return _plan(params, tokenizer, results_dir, load_tagger=refuse)
        except _TagsNotCached:
            return [
                Block(
                    f"LLM tags from {params['tagger_model']} not cached for every chunk: a real run tags "
                    "them first, then builds this chapter's requests (a dry run loads no model)",
                    EXPERIMENT,
                    [],
                    True,
                )
            ]
    return _plan(params, tokenizer, results_dir)


def _plan(params: dict, tokenizer, results_dir, load_tagger=None) -> list[Block]:
    taggers = taggers_for(params, results_dir, load_tagger=load_tagger)
    text, cases = cases_for(params)
    longest = max(params["lengths"], default=None)  # the claims scale runs no grid
    headline = long_requests(params, tokenizer=tokenizer, taggers=taggers, text=text)
    short = short_requests(params, tokenizer=tokenizer, taggers=taggers, text=text)
    # A grid case at the short length and its rotating depth is a sized request already.
    sized = {dedupe_key(r) for r in [*headline, *short]}
    every = [
        r
        for r in requests_for(params, tokenizer=tokenizer, taggers=taggers, cases=cases, text=text)
        if dedupe_key(r) not in sized
    ]
    head = [r for r in every if r.condition["length"] == longest and not r.condition["query_aware"]]
    rest = [r for r in every if r.condition["length"] != longest or r.condition["query_aware"]]
    return [
        *(
            [
                Block(
                    f"{params['long_length']} tokens, {' vs '.join(params['long_variants'])}",
                    EXPERIMENT,
                    headline,
                    True,
                )
            ]
            if headline
            else []
        ),
        *(
            [
                Block(
                    f"{params['short_length']} tokens on every case, {' vs '.join(params['short_variants'])}",
                    EXPERIMENT,
                    short,
                    True,
                )
            ]
            if short
            else []
        ),
        *(
            [Block(f"{longest} tokens, every variant", EXPERIMENT, head, not headline)]
            if head
            else []
        ),
        *([Block("other lengths and query-aware prompts", EXPERIMENT, rest)] if rest else []),
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
