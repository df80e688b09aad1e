"""Tagging-augmented generation chapter (needle questions in tagged haystacks).

Headline: TD+TC against the untagged baseline at ``long_length`` tokens (2,000 at book
scale), on every case of the ``long_needle_sets`` (the project's 48 and 106 extra needle
questions: the paired interval needs 100+ cases); then the paper's short-context
comparisons (``short_variants``, TD and TD+TC against the baseline, at ``short_length``,
250 tokens) on the same cases, so they are sized too; then every variant at the grid's
``lengths`` on ``num_cases`` cases. Two
things make this plan depend on models: haystack lengths are counted in the *reader's*
tokens (so the plan needs the reader, ``params["model"]``, which ``longctx reproduce``
fills in), and the LLM-tag variants need the tagger's tags, which are generations of
``tagger_model`` cached per chunk under ``<results>/<tagger>/tags/``. Building the plan
therefore runs the tagger on any chunk whose tags are not cached yet (on hf); with the
tags committed it loads nothing.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ParameterError
from ..store import dedupe_key
from ..tasks import tag_needles as tn
from . import Block

NOTEBOOK = "notebooks/tag_needles.py"
EXPERIMENT = "tag_needles"
NEEDS_MODEL = True  # chapter_blocks passes the reader as params["model"]
PLANS_RUN_MODELS = True  # the LLM tagger, for uncached chunks: chapter_blocks passes params["dry_run"]


def cases_for(params: dict) -> tuple[str, list[tn.NeedleCase]]:
    """(haystack text, the first ``num_cases`` seeded needle questions)."""
    text = tn.haystack_text()
    return text, tn.load_cases(params["needle_set"], n=params["num_cases"], avoid_text=text, seed=params["seed"])


def taggers_for(params: dict, results_dir: str | Path, load_tagger=None, batch_size: int = 8) -> tn.Taggers:
    """The taggers the variants need; the LLM tagger loads ``tagger_model`` (hf) only for
    chunks whose tags are not cached."""
    if load_tagger is None:
        def load_tagger():
            from ..models import load_model

            return load_model(params["tagger_model"])
    variants = (params["variants"] + params["query_aware_variants"] + list(params.get("long_variants") or [])
                + list(params.get("short_variants") or []))
    return tn.chapter_taggers(variants, results_dir=results_dir,
                              tagger_model=params["tagger_model"], llm_method=params["llm_tag_method"],
                              load=load_tagger, batch_size=batch_size)


def requests_for(params: dict, *, tokenizer, taggers: tn.Taggers, cases=None, text=None, lengths=None):
    if cases is None:
        text, cases = cases_for(params)
    return tn.make_requests(cases, tokenizer=tokenizer, lengths=lengths or params["lengths"],
                            variants=params["variants"], taggers=taggers, depths=params["depths"],
                            depth_mode=params["depth_mode"], query_aware_variants=params["query_aware_variants"],
                            query_aware_lengths=params["query_aware_lengths"], strategy=params["chunk_strategy"],
                            max_chars=params["chunk_chars"], text=text)


def long_cases(params: dict, text: str) -> list[tn.NeedleCase]:
    """Every case (or the first ``long_num_cases`` seeded ones) of each ``long_needle_sets``
    set, in set order; case ids differ across the shipped sets."""
    out = []
    for source in params["long_needle_sets"]:
        out += tn.load_cases(source, n=params["long_num_cases"], avoid_text=text, seed=params["seed"])
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise ParameterError(f"needle sets {params['long_needle_sets']} share case ids; pairing needs distinct ids")
    return out


def _every_case_at(params: dict, length, variants, *, tokenizer, taggers: tn.Taggers, text: str):
    """Every :func:`long_cases` case at ``length`` tokens in ``variants``, each case at one
    rotating depth (:func:`sized_depths`); none when ``length`` is null."""
    if not length:
        return []
    return tn.make_requests(long_cases(params, text), tokenizer=tokenizer, lengths=[length],
                            variants=variants, taggers=taggers, depths=params["depths"],
                            depth_mode="rotate", strategy=params["chunk_strategy"], max_chars=params["chunk_chars"],
                            text=text)


def long_requests(params: dict, *, tokenizer, taggers: tn.Taggers, text: str):
    """The headline pair at ``long_length`` tokens (none when it is null)."""
    return _every_case_at(params, params.get("long_length"), params["long_variants"], tokenizer=tokenizer,
                          taggers=taggers, text=text)


def short_requests(params: dict, *, tokenizer, taggers: tn.Taggers, text: str):
    """The paper's short-context comparisons, ``short_variants`` at ``short_length`` tokens,
    on the headline's cases (none when ``short_length`` is null). The grid asks the same
    length on ``num_cases`` cases, too few to size a paired change."""
    return _every_case_at(params, params.get("short_length"), params.get("short_variants") or [],
                          tokenizer=tokenizer, taggers=taggers, text=text)


def sized_depths(params: dict, text: str | None = None) -> dict[str, float]:
    """case id -> the depth its needle sits at in the sized comparisons (:func:`long_requests`,
    :func:`short_requests`). A grid case asked at the same length sits at its own rotating
    depth, so this picks the sized rows out of a store that holds both."""
    cases = long_cases(params, tn.haystack_text() if text is None else text)
    depths = params["depths"]
    return {c.id: float(depths[i % len(depths)]) for i, c in enumerate(cases)}


class _TagsNotCached(Exception):
    """A dry run reached a chunk the LLM tagger has not tagged yet."""


def plan(params: dict, results_dir: str | Path | None = None) -> list[Block]:
    """The chapter's blocks. With ``params["dry_run"]`` (``longctx reproduce --dry-run``
    sets it) the LLM tagger is never loaded: when a chunk's tags are not cached, the plan
    is one empty block that says so, since those prompts cannot be written without them."""
    if not params.get("model"):
        raise ParameterError("the tagging chapter's haystack lengths are counted in the reader's tokens: "
                             "pass the reader as params['model'] (longctx reproduce --model does)")
    if params.get("dry_run"):
        def refuse():
            raise _TagsNotCached

        try:
            return _plan(params, results_dir, load_tagger=refuse)
        except _TagsNotCached:
            return [Block(f"LLM tags from {params['tagger_model']} not cached for every chunk: a real run tags "
                          "them first, then builds this chapter's requests (a dry run loads no model)",
                          EXPERIMENT, [], True)]
    return _plan(params, results_dir)


def _plan(params: dict, results_dir, load_tagger=None) -> list[Block]:
    from ..models import load_tokenizer
    from ..paths import resolve

    tokenizer = load_tokenizer(params["model"])
    taggers = taggers_for(params, results_dir or resolve("data/results"), load_tagger=load_tagger)
    text, cases = cases_for(params)
    longest = max(params["lengths"])
    headline = long_requests(params, tokenizer=tokenizer, taggers=taggers, text=text)
    short = short_requests(params, tokenizer=tokenizer, taggers=taggers, text=text)
    # A grid case at the short length and its rotating depth is a sized request already.
    sized = {dedupe_key(r) for r in [*headline, *short]}
    every = [r for r in requests_for(params, tokenizer=tokenizer, taggers=taggers, cases=cases, text=text)
             if dedupe_key(r) not in sized]
    head = [r for r in every if r.condition["length"] == longest and not r.condition["query_aware"]]
    rest = [r for r in every if r.condition["length"] != longest or r.condition["query_aware"]]
    return [*([Block(f"{params['long_length']} tokens, {' vs '.join(params['long_variants'])}", EXPERIMENT, headline,
                     True)] if headline else []),
            *([Block(f"{params['short_length']} tokens on every case, {' vs '.join(params['short_variants'])}",
                     EXPERIMENT, short, True)] if short else []),
            Block(f"{longest} tokens, every variant", EXPERIMENT, head, not headline),
            *([Block("other lengths and query-aware prompts", EXPERIMENT, rest)] if rest else [])]
