"""Tagging-augmented generation chapter (needle questions in tagged haystacks).

Headline: TD+TC against the untagged baseline at ``long_length`` tokens (2,000 at book
scale), on every case of the ``long_needle_sets`` (the project's 48 and 106 extra needle
questions: the paired interval needs 100+ cases); then the paper's short-context
comparisons (``short_variants``, TD and TD+TC against the baseline, at ``short_length``,
250 tokens) on the same cases, so they are sized too; then every variant at the grid's
``lengths`` on ``num_cases`` cases. Two things make this plan depend on models: haystack
lengths are counted in the *reader's* tokens (so the plan asks its run for the reader's
tokenizer), and the LLM-tag variants need the tagger's tags, which are generations of
``tagger_model``, one stored row per chunk in its ``tags`` store (``<results>/<tagger>/tags/``).
Building the plan therefore asks the tagger, through the runner, for any chunk with no row
yet (on hf); with the rows committed it loads nothing.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..claims import (
    Estimate,
    by_unit,
    chapter_verdicts,
    estimable,
    paired_estimate,
    paper_frame,
)
from ..errors import ParameterError
from ..metrics import nolima_contains
from ..paths import resolve
from ..plots import FigureText, accuracy_by_position, book_figure, paired_differences
from ..reader import Reader
from ..report import (
    estimate_text,
    format_p,
    n_for_half_width,
    p_text,
    pct_ci,
    percent_words,
    points_ci,
)
from ..requests import dedupe_key
from ..results import point_links, provenance
from ..runner import Block, answer
from ..tagging import TAG_EXPERIMENT, system_prompt, tagging_report
from ..tasks import tag_needles as tn
from .contract import Chapter, ChapterResult, Run

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
    """The taggers the variants need; the LLM tagger (``tagger``, by default
    ``params["tagger_model"]`` through hf) loads only for chunks it has no stored answer for."""
    variants = (
        params["variants"]
        + params["query_aware_variants"]
        + list(params.get("long_variants") or [])
        + list(params.get("short_variants") or [])
    )
    return tn.chapter_taggers(
        variants,
        results_dir=results_dir,
        tagger=tagger or Reader(params["tagger_model"]),
        llm_method=params["llm_tag_method"],
        load=load_tagger,
        batch_size=batch_size,
    )


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


def sized_depths(params: dict, text: str | None = None) -> dict[str, float]:
    """case id -> the depth its needle sits at in the sized comparisons (:func:`long_requests`,
    :func:`short_requests`). A grid case asked at the same length sits at its own rotating
    depth, so this picks the sized rows out of a store that holds both."""
    if text is not None:
        return _depths(long_cases(params, text), params["depths"])
    key = json.dumps([params.get(k) for k in SIZED_PARAMS])
    if key not in _SIZED:  # the same for every reader: cut the cases once per process
        _SIZED[key] = _depths(long_cases(params, tn.haystack_text()), params["depths"])
    return dict(_SIZED[key])


SIZED_PARAMS = ("long_needle_sets", "long_num_cases", "seed", "depths")
_SIZED: dict[str, dict[str, float]] = {}


def _depths(cases, depths) -> dict[str, float]:
    return {c.id: float(depths[i % len(depths)]) for i, c in enumerate(cases)}


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


def _needle(row: dict) -> str:
    return tn.needle_of(row["example_id"])


def _contains(row: dict) -> float:
    return nolima_contains(row["output"], row["gold"])


# ---------------------------------------------------------------------------------------------
# Analysis: what the notebook shows, as numbers


@dataclass
class Haystack:
    """What every part of the chapter shares: the haystack text, the grid's cases, the
    reader's tokenizer and the taggers (LLM tags cached by chunk)."""

    text: str
    cases: list
    tokenizer: object
    taggers: tn.Taggers


def haystack(
    params: dict, tokenizer, results_dir: str | Path, *, tagger: Reader, batch_size: int = 8
) -> Haystack:
    """The chapter's haystack, cases, the reader's ``tokenizer`` and taggers; the LLM tagger
    (``tagger``) loads only for a chunk whose tags are not cached."""
    text, cases = cases_for(params)
    return Haystack(
        text,
        cases,
        tokenizer,
        taggers_for(params, results_dir, tagger=tagger, batch_size=batch_size),
    )


def stacked(run: Run) -> Haystack:
    """This run's :func:`haystack`, tagged by ``params["tagger_model"]`` on the reader's
    device and dtype (in transformers: the tagger is the paper's LLM tagging step)."""

    def build() -> Haystack:
        tagger = Reader.of(
            run.params["tagger_model"], device=run.reader.device, dtype=run.reader.dtype
        )
        batch_size = run.options.get("batch_size", 8)
        return haystack(
            run.params, run.tokenizer(), run.results, tagger=tagger, batch_size=batch_size
        )

    return run.once("haystack", build)


def answered(run: Run) -> dict:
    """The grid, the headline pair at ``long_length`` and the 250-token comparisons, each
    answered (stored rows reused) and scored; an empty table for a part the parameters skip.
    The parts are answered one by one because one prompt may serve two of them (the plan
    asks it once)."""
    return run.once("answered", lambda: _answered(run))


def _answered(run: Run) -> dict:
    params, stack = run.params, stacked(run)
    parts = {
        "grid": requests_for(
            params,
            tokenizer=stack.tokenizer,
            taggers=stack.taggers,
            cases=stack.cases,
            text=stack.text,
        ),
        "long": long_requests(
            params, tokenizer=stack.tokenizer, taggers=stack.taggers, text=stack.text
        ),
        "short": short_requests(
            params, tokenizer=stack.tokenizer, taggers=stack.taggers, text=stack.text
        ),
    }
    batch_size = run.options.get("batch_size", 8)
    return {
        name: pd.DataFrame(
            tn.score_rows(
                answer(
                    Block(name, EXPERIMENT, reqs), run.reader, run.results, batch_size=batch_size
                )
            )
        )
        if reqs
        else pd.DataFrame()
        for name, reqs in parts.items()
    }


def grid_accuracy(main: pd.DataFrame) -> pd.DataFrame:
    accuracy = tn.accuracy_table(main, by=["model", "variant", "length"])
    return accuracy.assign(label=accuracy["variant"].map(tn.VARIANT_LABELS))


def paper_change(
    paper: pd.DataFrame, variant: str, length, model: str = "Claude 3.5 Sonnet"
) -> str:
    """The paper's change for ``variant`` over the baseline at ``length`` (Table 1), or a dash."""
    t1 = paper[(paper["table"] == 1) & (paper["model"] == model)].set_index(["variant", "setting"])[
        "value"
    ]
    try:
        return f"{t1[(variant, str(length))] - t1[('baseline', str(length))]:+.1f}"
    except KeyError:
        return "—"


def gains_table(gains: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "length": r.length,
                "variant": tn.VARIANT_LABELS[r.variant],
                "ours: change (pts, 95% CI)": points_ci(r.change, r.ci_low, r.ci_high),
                "sign-flip p": p_text(r.p_sign_flip).removeprefix("p = "),
                "paper, Claude 3.5 Sonnet": paper_change(paper, r.variant, r.length),
            }
            for r in gains.itertuples()
        ]
    )


def grid_sizing(main: pd.DataFrame) -> pd.DataFrame:
    """Questions TD+TC (spaCy) minus baseline needs for ±10 points at each grid length."""
    pairs = main[main["variant"].isin(["baseline", "td_tc_spacy"])].pivot_table(
        index=["example_id", "length"], columns="variant", values="correct"
    )
    return pd.DataFrame(
        [
            {
                "comparison": "TD+TC (spaCy) minus baseline",
                "length": k,
                "questions": len(g),
                "questions for ±10 pts": n_for_half_width(g["td_tc_spacy"] - g["baseline"]),
            }
            for k, g in pairs.groupby(level="length")
        ]
    )


def sized_comparison(
    scored: pd.DataFrame, params: dict, paper: pd.DataFrame, which: str
) -> dict | None:
    """The sized comparisons at ``long_length`` (``which="long"``) or ``short_length``: each
    variant against the baseline on every case, with the questions that move each way."""
    if scored.empty:
        return None
    gains = tn.versus_baseline(scored).set_index("variant")
    pairs = scored.pivot_table(index="example_id", columns="variant", values="correct")
    length = params["long_length" if which == "long" else "short_length"]
    t1 = paper[paper["table"] == 1].set_index(["model", "variant", "setting"])["value"]
    rows = []
    for v, g in gains.iterrows():
        row = _comparison_row(f"{tn.VARIANT_LABELS[v]} minus baseline", g, pairs, v, "baseline")
        if which == "long":
            row.update(
                {
                    f"paper: {m.removesuffix(' Sonnet')}, 500 / 16K": " / ".join(
                        f"{t1[(m, v, s)] - t1[(m, 'baseline', s)]:+.1f}"
                        if (m, v, s) in t1.index
                        else "—"  # an arm the paper did not run (our controls)
                        for s in ("500", "16000")
                    )
                    for m in ("Claude 3.5 Sonnet", "Claude 3.7 Sonnet")
                }
            )
        else:
            row["paper (Claude 3.5)"] = paper_change(paper, v, length)
        rows.append(row)
    tags_alone = tags_alone_estimate(scored, params["seed"])
    if tags_alone is not None:
        label = (
            f"{tn.VARIANT_LABELS['td_tc_spacy']} minus {tn.VARIANT_LABELS[TAGS_CONTROL]} "
            "(the tags alone; exploratory)"
        )
        rows.append(_comparison_row(label, tags_alone, pairs, "td_tc_spacy", TAGS_CONTROL))
    by_hop = tn.accuracy_table(scored, by=["variant", "hop"])
    hops = pd.concat([tn.accuracy_table(scored, by=["variant"]).assign(hop="all"), by_hop])
    return {
        "gains": gains,
        "tags_alone": tags_alone,
        "pairs": pairs,
        "table": pd.DataFrame(rows),
        "hops": hops,
        "scored": scored,
    }


def _comparison_row(label: str, g, pairs: pd.DataFrame, treatment: str, control: str) -> dict:
    """One line of a sized table: ``g`` is a :func:`~longctx.tasks.tag_needles.versus_baseline`
    row (sides and change over needles), ``pairs`` each question's answers by variant."""
    diff = pairs[treatment] - pairs[control]
    return {
        "comparison": label,
        "needles (questions)": f"{int(g.needles)} ({int(g.n)})",
        "accuracy over needles (%)": f"{g.variant_level:.1f} vs {g.control_level:.1f}",
        "change (pts, 95% CI)": points_ci(g.change, g.ci_low, g.ci_high),
        "p": format_p(g.p_sign_flip),
        "discordant questions": int((diff != 0).sum()),
        "needles for ±10 pts": n_for_half_width(diff.groupby(diff.index.map(tn.needle_of)).mean()),
    }


TAGS_CONTROL = "td_tc_system"  # TD+TC's system message over an untagged context


def tags_alone_estimate(scored: pd.DataFrame, seed: int):
    """TD+TC (spaCy) against its own system message over an untagged context, paired by
    needle: what the tags in the context add once the system message is held fixed (the
    contrast fixed with the arm, before its rows; exploratory, not one of the paper's claims).
    None where the control arm was not run."""
    if TAGS_CONTROL not in set(scored["variant"]) or "td_tc_spacy" not in set(scored["variant"]):
        return None
    both = scored[scored["variant"].isin([TAGS_CONTROL, "td_tc_spacy"])]
    found = tn.versus_baseline(both, control=TAGS_CONTROL)
    return next(found[found["variant"] == "td_tc_spacy"].itertuples(), None)


def system_prompts(variants) -> str:
    """Each arm's full system message, as a reader can open it under the tables: the
    baseline keeps the chat template's default one."""
    parts = []
    for v in variants:
        text = system_prompt(v)
        shown = (
            "(no system message of ours: the chat template's default one stays, for Qwen "
            '"You are Qwen, created by Alibaba Cloud. You are a helpful assistant.")'
            if text is None
            else text
        )
        parts.append(
            f'<details class="example"><summary>{html.escape(tn.VARIANT_LABELS[v])}</summary>'
            f'<pre class="example-prompt">{html.escape(shown)}</pre></details>'
        )
    return "\n".join(parts)


def hop_table(hops: pd.DataFrame) -> pd.DataFrame:
    return hops.assign(
        variant=hops["variant"].map(tn.VARIANT_LABELS),
        **{
            # in percent, as every other accuracy on the page
            "accuracy (%, 95% CI)": [
                pct_ci(a, lo, hi)
                for a, lo, hi in zip(hops["accuracy"], hops["ci_low"], hops["ci_high"])
            ]
        },
    )[["variant", "hop", "n", "accuracy (%, 95% CI)"]]


PAPER_VARIANT_LABELS = {**tn.VARIANT_LABELS, "td_tc_llm": "TD+TC (the paper's LLM tags)"}


def arm_label(arm: str) -> str:
    """A query-aware arm (``variant`` or ``variant+qac``) in words."""
    variant, _, qac = arm.partition("+")
    return tn.VARIANT_LABELS.get(variant, variant) + (", question also before" if qac else "")


def paper_table(paper: pd.DataFrame) -> pd.DataFrame:
    t1 = paper[paper["table"] == 1].pivot_table(
        index=["model", "variant"], columns="setting", values="value", sort=False
    )
    return (
        t1.reset_index()
        .assign(variant=lambda t: t["variant"].map(PAPER_VARIANT_LABELS).fillna(t["variant"]))
        .rename(columns={"drop_rate": "drop rate (%)"})
    )


def ours_table(accuracy: pd.DataFrame, variants) -> pd.DataFrame:
    ours = (accuracy.pivot_table(index="variant", columns="length", values="accuracy") * 100).round(
        1
    )
    return (
        ours.reindex([v for v in variants if v in ours.index])
        .rename(index=tn.VARIANT_LABELS)
        .reset_index()
    )


def tag_stats(stack: Haystack, params: dict) -> pd.DataFrame:
    """Per tagger: haystack chunks and needles tagged, tags per tagged chunk, the commonest tags."""
    longest = tn.haystack_chunks(
        stack.tokenizer,
        max(params["lengths"]),
        strategy=params["chunk_strategy"],
        max_chars=params["chunk_chars"],
        text=stack.text,
    )
    chunks = longest + [c.needle for c in stack.cases]
    out = []
    for kind in ("spacy", "llm"):
        if getattr(stack.taggers, kind) is None:
            continue
        tags = stack.taggers.tags(kind, chunks)
        report = tagging_report(chunks, tags)
        out.append(
            {
                "tagger": kind,
                "haystack chunks": len(longest),
                "haystack chunks tagged": sum(1 for t in tags[: len(longest)] if t),
                "needles tagged": f"{sum(1 for t in tags[len(longest) :] if t)}/{len(stack.cases)}",
                "tags per tagged chunk": round(report.tags / max(1, report.tagged_chunks), 1),
                "most used tags": ", ".join(
                    sorted(report.by_tag, key=report.by_tag.get, reverse=True)[:4]
                ),
            }
        )
    return pd.DataFrame(out)


def llm_tagged_chunks(stack: Haystack, params: dict) -> pd.DataFrame:
    """The haystack chunks the LLM tagger tagged, with their tags."""
    longest = tn.haystack_chunks(
        stack.tokenizer,
        max(params["lengths"]),
        strategy=params["chunk_strategy"],
        max_chars=params["chunk_chars"],
        text=stack.text,
    )
    tags = stack.taggers.tags("llm", longest)
    return pd.DataFrame(
        [
            {"chunk": k, "starts": c.strip()[:70], "LLM tags": t}
            for k, (c, t) in enumerate(zip(longest, tags))
            if t
        ]
    )


def llm_answers(stack: Haystack, n: int = 6) -> pd.DataFrame:
    """The LLM tagger's stored answers for the first needles, with the tags read from them."""
    tagger = stack.taggers.llm
    answers = tagger.answers()

    def row(needle: str) -> dict:
        found = answers.get(needle[:80])
        if found is None:
            return {"needle": needle, "tags read": "not asked", "the tagger's answer": ""}
        return {
            "needle": needle,
            "tags read": ", ".join(tagger.tags_from(found)) or "none",
            "the tagger's answer": " · ".join(
                f"{m.upper()}: {a.strip()}" for m, a in found.items()
            ),
        }

    return pd.DataFrame([row(c.needle) for c in stack.cases[:n]])


def tagged_needle(params: dict, stack: Haystack) -> str | None:
    """A spaCy-tagged needle in its context (a few hundred characters around it)."""
    requests = requests_for(
        params, tokenizer=stack.tokenizer, taggers=stack.taggers, cases=stack.cases, text=stack.text
    )
    example = next((r for r in requests if r.condition["variant"] == "td_tc_spacy"), None)
    if example is None:
        return None
    at = example.prompt.find(next(c.needle for c in stack.cases if c.id == example.example_id))
    return example.prompt[max(0, at - 300) : at + 200]


def wrong_answers(main: pd.DataFrame) -> pd.DataFrame:
    wrong = main[main["correct"] == 0]
    return (
        wrong.groupby(["variant_label", "length"])["output"]
        .agg(lambda s: "; ".join(f"{k!r} x{v}" for k, v in s.value_counts().head(3).items()))
        .rename("top wrong answers")
        .reset_index()
        .rename(columns={"variant_label": "variant"})
    )


def by_depth(main: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per variant and needle depth (percent of the context before it), pooled over lengths."""
    table = tn.accuracy_table(main, by=["model", "variant", "depth"])
    return table.assign(
        depth=(100 * table["depth"]).round().astype(int),
        label=table["variant"].map(tn.VARIANT_LABELS),
    )


def overhead(main: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tag tokens and their share of the context against the change over the baseline, and
    each tagged variant against TD alone."""
    over = tn.overhead_vs_gain(main)
    tagged = over[over["variant"].str.startswith("td_tc")]
    tagged = tagged.assign(
        variant=tagged["variant"].map(tn.VARIANT_LABELS),
        tag_tokens=tagged["tag_tokens"].round(1),
        tag_share=(100 * tagged["tag_share"]).round(1),
        change=[
            points_ci(c, lo, hi)
            for c, lo, hi in zip(tagged["change"], tagged["ci_low"], tagged["ci_high"])
        ],
    )
    shown = tagged.assign(p=tagged["p_sign_flip"].map(format_p))[
        ["variant", "length", "tag_tokens", "tag_share", "change", "p"]
    ].rename(
        columns={
            "length": "haystack tokens",
            "tag_tokens": "tag tokens",
            "tag_share": "tag share of context (%)",
            "change": "change vs baseline (pts, 95% CI)",
        }
    )
    against_td = tn.versus_baseline(main[main["variant"] != "baseline"], control="td")
    return shown, against_td


def query_aware(scored: pd.DataFrame, params: dict) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Accuracy with and without the question before the context, and each arm against the baseline."""
    rows = scored[
        scored["length"].isin(params["query_aware_lengths"])
        & scored["variant"].isin(params["query_aware_variants"])
    ]
    if not rows["query_aware"].any():
        return None
    table = (
        rows.pivot_table(index="variant", columns="query_aware", values="correct", aggfunc="mean")
        * 100
    )
    rows = rows.assign(arm=rows["variant"] + rows["query_aware"].map({True: "+qac", False: ""}))
    gains = tn.versus_baseline(rows.assign(variant=rows["arm"]), control="baseline")
    return table, gains


def quoted(
    main: pd.DataFrame,
    gains: pd.DataFrame,
    drops: pd.DataFrame,
    against_td: pd.DataFrame,
    stats: pd.DataFrame,
    qac,
    long_view: dict | None,
    short_view: dict | None,
    estimates: dict,
    params: dict,
) -> dict:
    """Every number the chapter's prose quotes, by glue key: the grid and its tags, the
    query-aware prompts, and the sized comparisons at the long and the short length."""
    out = _grid_quotes(main, gains, drops, against_td, stats, params)
    if qac is not None:
        out.update(_query_aware_quotes(qac, params))
    if long_view is not None:
        out.update(_long_quotes(long_view, estimates, params))
    if short_view is not None:
        out.update(_short_quotes(short_view, estimates, params, top=out["tag-top-wrong"]))
    for which, view in (("short", short_view), ("long", long_view)):
        alone = view.get("tags_alone") if view is not None else None
        if alone is not None:
            out[f"tag-{which}-tags-alone"] = estimate_text(
                Estimate(
                    alone.change, alone.ci_low, alone.ci_high, alone.needles, alone.p_sign_flip, ""
                )
            )
    return out


def _tag_cost_quotes(main: pd.DataFrame, lengths: list) -> dict:
    """The baseline's accuracy by depth, and what the tags cost in tokens."""
    base_depth = by_depth(main)
    base_depth = base_depth[base_depth["variant"] == "baseline"]
    tokens = main.groupby(["variant", "length"])["tag_tokens"].mean()
    shares = (
        main.assign(share=main["tag_tokens"] / main["context_tokens"])
        .groupby("variant")["share"]
        .mean()
    )
    return {
        "tag-depth-levels": " / ".join(
            f"{100 * a:.1f}" for a in base_depth.sort_values("depth")["accuracy"]
        ),
        "tag-depth-units": int(base_depth["units"].iloc[0]) if len(base_depth) else 0,
        "tag-spacy-tokens": f"{tokens[('td_tc_spacy', lengths[0])]:.1f}-{tokens[('td_tc_spacy', lengths[-1])]:.1f}",
        "tag-spacy-share": f"{100 * shares['td_tc_spacy']:.0f}%",
        "tag-llm-tokens": f"{tokens[('td_tc_llm', lengths[0])]:.0f}-{tokens[('td_tc_llm', lengths[-1])]:.0f}"
        if "td_tc_llm" in set(main["variant"])
        else "—",
    }


def _grid_quotes(
    main: pd.DataFrame,
    gains: pd.DataFrame,
    drops: pd.DataFrame,
    against_td: pd.DataFrame,
    stats: pd.DataFrame,
    params: dict,
) -> dict:
    lengths = sorted(params["lengths"])
    acc = (
        main.pivot_table(index="variant", columns="length", values="correct", aggfunc="mean") * 100
    )
    d = drops.set_index("variant")
    g = gains.set_index(["length", "variant"])
    wrong = main[main["correct"] == 0]
    longest_wrong = wrong[wrong["length"] == lengths[-1]]

    def levels(variant):
        return " / ".join(f"{acc.loc[variant, n]:.1f}" for n in lengths)

    def change(length, variant):
        r = g.loc[(length, variant)]
        return f"{points_ci(r['change'], r['ci_low'], r['ci_high'])}, {p_text(r['p_sign_flip'])}"

    s = stats.set_index("tagger")
    out = {
        **_tag_cost_quotes(main, lengths),
        "tag-cases": main["example_id"].nunique(),
        "tag-lengths": ", ".join(f"{n:,}" for n in lengths),
        "tag-baseline-levels": levels("baseline"),
        "tag-td-levels": levels("td"),
        "tag-spacy-levels": levels("td_tc_spacy"),
        "tag-drop-baseline": drop_rate_text(d.loc["baseline"]),
        "tag-drop-spacy": drop_rate_text(d.loc["td_tc_spacy"]),
        "tag-longest-wrong": len(longest_wrong[longest_wrong["variant"] == "baseline"]),
        "tag-top-wrong": wrong["output"].value_counts().index[0] if len(wrong) else "—",
        "tag-td-short": change(lengths[0], "td"),
        "tag-td-mid": f"{-g.loc[(lengths[1], 'td'), 'change']:.1f}",
        "tag-td-long": change(lengths[-1], "td"),
        "tag-td-wrong-top": int(
            (
                wrong[(wrong["variant"] == "td") & (wrong["length"] == lengths[0])]["output"]
                == (wrong["output"].value_counts().index[0] if len(wrong) else "")
            ).sum()
        ),
        "tag-td-wrong": int(((wrong["variant"] == "td") & (wrong["length"] == lengths[0])).sum()),
        "tag-spacy-changes": ", ".join(
            f"{g.loc[(n, 'td_tc_spacy'), 'change']:+.1f}" for n in lengths
        ),
        "tag-spacy-mid-p": p_text(g.loc[(lengths[1], "td_tc_spacy"), "p_sign_flip"]),
        "tag-spacy-vs-td": (lambda r: points_ci(r["change"], r["ci_low"], r["ci_high"]))(
            against_td.set_index(["length", "variant"]).loc[(lengths[0], "td_tc_spacy")]
        ),
    }
    if "llm" in s.index:
        out.update(
            {
                "tag-llm-needles": s.loc["llm", "needles tagged"],
                "tag-llm-chunks": f"{s.loc['llm', 'haystack chunks tagged']} of {s.loc['llm', 'haystack chunks']}",
                "tag-llm-questions": int((main["variant"] == "td_tc_llm").sum()),
                "tag-llm-levels": levels("td_tc_llm"),
            }
        )
    return out


def _query_aware_quotes(qac, params: dict) -> dict:
    out: dict = {}
    table, qgains = qac
    q = qgains.set_index("variant").loc["baseline+qac"]
    out.update(
        {
            "tag-qac-length": f"{params['query_aware_lengths'][0]:,}",
            "tag-qac-baseline": f"{table.loc['baseline', False]:.1f}% to {table.loc['baseline', True]:.1f}%",
            "tag-qac-change": f"{points_ci(q['change'], q['ci_low'], q['ci_high'])} points, "
            f"{p_text(q['p_sign_flip'])}",
            "tag-qac-llm": f"{table.loc['td_tc_llm', False]:.1f}% to {table.loc['td_tc_llm', True]:.1f}%"
            if "td_tc_llm" in table.index
            else "—",
        }
    )
    return out


def _long_quotes(long_view: dict, estimates: dict, params: dict) -> dict:
    out: dict = {}
    spacy_long = estimates["tag-spacy-long"]
    pairs = long_view["pairs"]
    diff = pairs["td_tc_spacy"] - pairs["baseline"]
    scored_long = long_view["scored"]
    misses = scored_long[scored_long["correct"] == 0]
    top_long = misses[misses["variant"] == "td_tc_spacy"]["output"].str.strip().value_counts()
    top_name = top_long.index[0] if len(top_long) else "—"
    at_start = scored_long[scored_long["depth"] == 0.0].groupby("variant")["correct"].mean()
    tokens_long = scored_long.groupby("variant")["prompt_tokens"].mean()
    out.update(
        {
            "tag-long-length": f"{params['long_length']:,}",
            "tag-long-n": len(pairs),
            "tag-long-baseline": f"{int(pairs['baseline'].sum())} ({100 * pairs['baseline'].mean():.0f}%)",
            "tag-long-spacy": f"{int(pairs['td_tc_spacy'].sum())} ({100 * pairs['td_tc_spacy'].mean():.0f}%)",
            "tag-long": estimate_text(estimates["tag-spacy-long"]),
            "tag-long-half-width": f"{(spacy_long.ci_high - spacy_long.ci_low) / 2:.1f}",
            "tag-long-changed": int((diff != 0).sum()),
            "tag-long-worse": int((diff < 0).sum()),
            "tag-long-top-wrong": top_name,
            "tag-long-top-wrong-n": int(top_long.iloc[0]) if len(top_long) else 0,
            "tag-long-misses": int((misses["variant"] == "td_tc_spacy").sum()),
            "tag-long-base-top": int(
                (misses[misses["variant"] == "baseline"]["output"].str.strip() == top_name).sum()
            ),
            "tag-long-base-misses": int((misses["variant"] == "baseline").sum()),
            "tag-long-tokens": f"{tokens_long['td_tc_spacy']:,.0f} vs {tokens_long['baseline']:,.0f}",
            "tag-long-at-start": f"{100 * at_start.get('baseline', float('nan')):.0f}% and "
            f"{100 * at_start.get('td_tc_spacy', float('nan')):.0f}%",
        }
    )
    return out


def _short_quotes(short_view: dict, estimates: dict, params: dict, top: str) -> dict:
    out: dict = {}
    pairs = short_view["pairs"]
    short_misses = short_view["scored"][short_view["scored"]["correct"] == 0]
    for v, key in (("td", "td"), ("td_tc_spacy", "spacy")):
        diff = pairs[v] - pairs["baseline"]
        est = estimates["tag-td" if v == "td" else "tag-spacy"]
        out.update(
            {
                f"tag-short-{key}": estimate_text(est),
                f"tag-short-{key}-lost": int((diff < 0).sum()),
                f"tag-short-{key}-gained": int((diff > 0).sum()),
                # a mean over needles, the unit of the change quoted beside it
                f"tag-short-{key}-pct": f"{est.treatment:.1f}%",
                f"tag-short-{key}-misses": int((short_misses["variant"] == v).sum()),
                f"tag-short-{key}-top": int(
                    ((short_misses["variant"] == v) & (short_misses["output"] == top)).sum()
                ),
            }
        )
    spacy = estimates["tag-spacy"]
    needles = pairs.index.map(tn.needle_of)
    if "tag-td-definitions" in estimates:
        out.update(
            {
                "tag-short-definitions": estimate_text(estimates["tag-td-definitions"]),
                "tag-short-framing-pct": f"{estimates['tag-td-definitions'].control:.1f}%",
            }
        )
    out.update(
        {
            "tag-short-length": f"{params['short_length']:,}",
            "tag-short-n": len(pairs),
            "tag-short-needles": needles.nunique(),
            "tag-short-baseline-pct": f"{estimates['tag-td'].control:.1f}%",
            "tag-short-baseline-misses": int((short_misses["variant"] == "baseline").sum()),
            "tag-short-baseline-top": int(
                ((short_misses["variant"] == "baseline") & (short_misses["output"] == top)).sum()
            ),
            "tag-short-spacy-half-width": f"{(spacy.ci_high - spacy.ci_low) / 2:.1f}",
            "tag-short-spacy-needed": spacy.needed,
            "tag-short-td-half-width": f"{(estimates['tag-td'].ci_high - estimates['tag-td'].ci_low) / 2:.1f}",
        }
    )
    return out


def statements(view: TagResult, params: dict) -> dict[str, bool]:
    """What the chapter's prose says in words, each as a check on the committed run."""
    acc = view.main.pivot_table(index="variant", columns="length", values="correct")
    wrong = view.main[view.main["correct"] == 0]
    spacy = view.estimates.get("tag-spacy")
    said = {
        "TD, and spaCy TD+TC at the long length, go the opposite way to the paper": view.verdicts.get(
            "tag-td"
        )
        == view.verdicts.get("tag-spacy-long")
        == "opposite direction",
        "spaCy TD+TC at the short length is not reproduced": view.verdicts.get("tag-spacy")
        == "not reproduced",
        "TD is below the baseline at every length and spaCy TD+TC above TD at the shortest": bool(
            (acc.loc["td"] < acc.loc["baseline"]).all()
            and (acc.loc["td_tc_spacy"] > acc.loc["td"]).iloc[0]
        ),
        "the LLM-tag arm is 0% at every length": "td_tc_llm" in acc.index
        and bool((acc.loc["td_tc_llm"] == 0).all()),
        "every baseline miss at the longest length is 'Bronnie Ware'": bool(
            (wrong[wrong["length"] == max(params["lengths"])]["output"] == "Bronnie Ware").all()
        ),
        "the short spaCy interval holds zero and is wider than the ±10-point target": spacy
        is not None
        and spacy.ci_low < 0 < spacy.ci_high
        and (spacy.ci_high - spacy.ci_low) / 2 > 10,
        "most of TD's loss is its framing: the definitions alone are not decided": view.verdicts.get(
            "tag-td-definitions"
        )
        == "inconclusive at this n"
        and abs(view.estimates["tag-td-definitions"].difference)
        < abs(view.estimates["tag-td"].difference) / 3,
        "tags are 5-20% of the context": bool(
            view.overhead["tag share of context (%)"].between(5, 20).all()
        ),
    }
    short_alone = view.short.get("tags_alone") if view.short is not None else None
    long_alone = view.long.get("tags_alone") if view.long is not None else None
    if short_alone is not None and long_alone is not None:
        said[
            "with the system message held fixed, the tags help at the short length and are not "
            "decided at the long one; the system message costs more than the tags win back"
        ] = (
            short_alone.ci_low > 0
            and long_alone.ci_low <= 0 <= long_alone.ci_high
            and view.short["gains"].loc[TAGS_CONTROL, "change"] < -short_alone.change
        )
    if view.long is not None:
        diff = view.long["pairs"]["td_tc_spacy"] - view.long["pairs"]["baseline"]
        said["at the long length, the questions that change almost all change for the worse"] = (
            bool((diff < 0).sum() > 0.95 * (diff != 0).sum())
        )
    return said


@dataclass(kw_only=True)
class TagResult(ChapterResult):
    """The chapter's numbers: ``grid`` (every scored grid row) and ``main`` (without
    query-aware prompts), ``accuracy``, ``gains``, ``drops``, ``overhead`` and
    ``against_td`` over the grid, ``stats`` (what the taggers tagged), ``qac`` (query-aware
    prompts, None when not run), ``long`` and ``short`` (the sized comparisons, None when
    skipped), the figure's Data line, and what the figures draw beside ours: ``params``,
    ``stack`` and ``paper`` (the paper's Table 1)."""

    params: dict
    stack: Haystack
    paper: pd.DataFrame
    grid: pd.DataFrame
    main: pd.DataFrame
    accuracy: pd.DataFrame
    gains: pd.DataFrame
    drops: pd.DataFrame
    overhead: pd.DataFrame
    against_td: pd.DataFrame
    stats: pd.DataFrame
    qac: tuple[pd.DataFrame, pd.DataFrame] | None
    long: dict | None
    short: dict | None
    provenance: str


def novelqa_paper_quotes(paper: pd.DataFrame) -> dict:
    """The smallest and largest change TD+TC with spaCy tags makes in the paper's NovelQA+
    (Table 2), over its models and question kinds, each with where it happened."""
    t2 = paper[paper["table"] == 2].pivot_table(
        index=["model", "setting"], columns="variant", values="value"
    )
    change = (t2["td_tc_spacy"] - t2["baseline"]).sort_values()

    def where(i: int) -> str:
        (model, setting), value = change.index[i], change.iloc[i]
        return f"{value:+.1f} ({model.replace(' Sonnet', '')}, {setting} questions)"

    return {"tag-paper-novelqa-low": where(0), "tag-paper-novelqa-high": where(-1)}


PAPER_MODEL = "Claude 3.5 Sonnet"  # the paper's reader its Table 1 discussion leads with


def paper_curve(paper: pd.DataFrame, lengths) -> pd.DataFrame:
    """The paper's NoLiMa+ accuracy (Table 1, as a share) at the lengths we also ran, one
    row per variant we plot, labelled as :func:`grid_accuracy` labels ours."""
    t1 = paper[
        (paper["table"] == 1)
        & (paper["model"] == PAPER_MODEL)
        & paper["variant"].isin(tn.VARIANT_LABELS)
    ]
    t1 = t1[pd.to_numeric(t1["setting"], errors="coerce").isin(lengths)]
    return pd.DataFrame(
        {
            "length": t1["setting"].astype(int),
            "accuracy": t1["value"] / 100,
            "label": t1["variant"].map(tn.VARIANT_LABELS),
        }
    )


def figure_text(view: TagResult) -> FigureText:
    """:func:`figure`'s caption and alt text, from the lines it draws."""
    shown = view.accuracy
    lengths = sorted(shown["length"].unique())
    shared = sorted(set(paper_curve(view.paper, lengths)["length"]))
    caption = (
        "Share of needle questions answered with the right character (NoLiMa's contains) "
        f"against haystack length, per prompt variant, {view.label}; "
        f"{int(shown['n'].min())} questions per point, 95% Wilson bands. TD: tag definitions "
        "in the system prompt; TD+TC: definitions plus tagged context. Open diamonds on dotted "
        f"lines: the paper's {PAPER_MODEL} on NoLiMa+ at "
        f"{' and '.join(f'{k:,}' for k in shared) or 'no shared length'} tokens (Table 1), one "
        f"colour per variant. The LLM-tagger arm's tags come from "
        f"`{view.params['tagger_model']}` (the tagging section shows what it tagged)."
    )
    lines = []
    for label, group in shown.groupby("label", sort=False):
        acc = group.sort_values("length")["accuracy"]
        lines.append(
            f"{label}: {percent_words(acc.iloc[0])} at {lengths[0]:,}, {percent_words(acc.iloc[-1])} at "
            f"{lengths[-1]:,}" + (" (zero at every length)" if (acc == 0).all() else "")
        )
    alt = (
        f"Line chart of accuracy against haystack tokens ({', '.join(f'{k:,}' for k in lengths)})"
        ". " + "; ".join(lines) + "."
    )
    return FigureText(caption, alt)


def sized_text(view: TagResult) -> FigureText:
    """:func:`sized_figure`'s caption and alt text, from the differences it draws."""
    diffs = sized_differences(view)
    questions = view.short["pairs"].shape[0] if view.short is not None else 0
    needles = view.short["gains"]["needles"].max() if view.short is not None else 0
    caption = (
        f"Each prompt variant minus the baseline on the same {questions} needle questions "
        f"({int(needles)} needles), at {view.params['short_length']:,} tokens (the paper's "
        f"shortest length) and at {view.params['long_length']:,} tokens (the headline pair); "
        f"points with 95% bootstrap intervals over needles, {view.label}. Diamonds: the "
        f"paper's change for {PAPER_MODEL} on NoLiMa+ at 250 tokens, and at 500 tokens (its "
        f"nearest length) beside our {view.params['long_length']:,}."
    )
    right = diffs["paper"].notna() & (diffs["paper"] > diffs["ci_high"])
    alt = (
        "Forest plot of changes against the baseline. "
        + "; ".join(f"{r.label}: {r.difference:+.0f} points" for r in diffs.itertuples())
        + ". The paper's changes lie to the right of "
        + (
            "every interval they sit beside."
            if right.sum() == diffs["paper"].notna().sum()
            else f"{int(right.sum())} of the {int(diffs['paper'].notna().sum())} intervals."
        )
    )
    return FigureText(caption, alt)


DEPTH_VARIANTS = ("baseline", "td_tc_spacy")  # the headline pair: five lines were noise


def headline_depths(view: TagResult) -> pd.DataFrame:
    """:func:`by_depth` for the headline pair only: what the depth figure draws."""
    depths = by_depth(view.main)
    return depths[depths["variant"].isin(DEPTH_VARIANTS)]


def depth_text(view: TagResult) -> FigureText:
    """:func:`depth_figure`'s caption and alt text."""
    depths = headline_depths(view)
    per_point = depths["units"].min()
    caption = (
        "Accuracy against the needle's depth (percent of the context before it) for the "
        f"baseline and TD+TC (spaCy), pooled over the {view.main['length'].nunique()} lengths, "
        f"{view.label}; each point is "
        f"{int(per_point)} questions x {view.main['length'].nunique()} lengths, with a 95% "
        "bootstrap interval over questions."
    )
    widest = (depths["ci_high"] - depths["ci_low"]).max()
    alt = (
        f"Line chart of accuracy against needle depth ({', '.join(str(d) for d in sorted(depths['depth'].unique()))}"
        f" percent) for the baseline and TD+TC with spaCy tags; intervals up to "
        f"{100 * widest:.0f} points wide."
    )
    return FigureText(caption, alt)


@book_figure
def figure(view: TagResult):
    """Accuracy against haystack length per prompt variant (log-scaled lengths), with the
    paper's numbers at the lengths it shares with ours."""
    lengths = sorted(view.params["lengths"])
    shown = view.accuracy
    paper = paper_curve(view.paper, lengths)
    paper = paper[paper["label"].isin(set(shown["label"]))]
    # The paper's marks of one length sit close together: spread them a little across the
    # (log) length axis, one step per variant, so each stays visible.
    order = {label: k for k, label in enumerate(dict.fromkeys(tn.VARIANT_LABELS.values()))}
    step = (paper["label"].map(order).astype(float) - (len(order) - 1) / 2).fillna(0)
    paper = paper.assign(length=paper["length"] * 1.04**step)
    fig = accuracy_by_position(
        shown,
        x="length",
        facet="model",
        hue="label",
        hue_order=list(tn.VARIANT_LABELS.values()),
        facet_title="{}",
        xlabel="Haystack tokens",
        paper=paper,
        paper_label=f"paper: {PAPER_MODEL} (NoLiMa+, Table 1), spread a little per variant",
        links=view.links,
        height=4.2,
    )
    fig.axes[0].set_xscale("log")
    fig.axes[0].set_xticks(lengths, [f"{n:,}" for n in lengths])
    fig.axes[0].minorticks_off()
    return fig


@book_figure
def depth_figure(view: TagResult):
    """Accuracy against the needle's depth for the headline pair, pooled over lengths, each
    with its band."""
    return accuracy_by_position(
        headline_depths(view),
        x="depth",
        facet="model",
        hue="label",
        hue_order=list(tn.VARIANT_LABELS.values()),
        facet_title="{} (all lengths)",
        xlabel="Needle depth (% of the context before it)",
    )


def grid_tables(view: TagResult) -> list:
    """The grid's changes against the baseline beside the paper's, and the questions each
    comparison would need for ±10 points."""
    return [
        (
            gains_table(view.gains, view.paper),
            "The paper reports 250, 500, 16K and 32K tokens; we run 250 to "
            f"{max(view.params['lengths']):,}.",
        ),
        (
            grid_sizing(view.main),
            "From the observed per-question differences. The project's needle set has 48 "
            "questions; the comparisons below are asked on 154 (the set plus 106 extra "
            "pairs written to the same rules).",
        ),
    ]


def long_tables(view: TagResult) -> list:
    """Accuracy by hop and the sized comparison at ``long_length`` (nothing when skipped)."""
    if view.long is None:
        return []
    return [
        (
            hop_table(view.long["hops"]),
            f"{view.params['long_length']} haystack tokens; Wilson intervals.",
        ),
        (
            view.long["table"],
            "A needle's one-hop and two-hop questions share it, so the needle is the unit: "
            "accuracy is each needle's questions averaged, then averaged over needles; the "
            "change is the paired difference of those, with a bootstrap interval and exact "
            "sign-flip p over needles. The paper's changes bracket our length (it reports no "
            "length between 500 and 16K).",
        ),
    ]


def short_tables(view: TagResult) -> list:
    """The sized comparisons at ``short_length`` (nothing when skipped)."""
    if view.short is None:
        return []
    return [
        (
            view.short["table"],
            f"{view.params['short_length']} haystack tokens; each question at one depth; "
            "accuracy over needles: the variant vs the baseline, each needle's questions "
            "averaged first; discordant: questions whose answer changes. "
            "A needle's one-hop and two-hop questions share it, so the needle is the unit: "
            "bootstrap interval and exact sign-flip p over per-needle differences, and the "
            "needles a ±10-point interval needs from their observed spread. TD framing: TD's "
            "system message without the definitions (our control; see What differs). TD+TC's "
            "system message, untagged: the control arm for the tags themselves.",
        )
    ]


def paper_tables(view: TagResult) -> list:
    """The paper's Table 1 and ours in the same shape."""
    cases = view.main["example_id"].nunique()
    return [
        paper_table(view.paper),
        (
            ours_table(view.accuracy, view.params["variants"]),
            f"Ours: accuracy (%) at each haystack length, {cases} questions per cell.",
        ),
    ]


def drop_rate_text(row, unit: str = "%") -> str:
    """An extremum drop rate with its 95% interval, ``34.8% [5.3, 58.3]`` (a table whose
    header names the unit passes ``unit=""``); undefined with no accuracy at the shortest
    length."""
    rate, low, high = row["drop_rate"], row["ci_low"], row["ci_high"]
    return "undefined" if rate != rate else f"{rate:.1f}{unit} [{low:.1f}, {high:.1f}]"


def drops_table(view: TagResult) -> pd.DataFrame:
    """The extremum drop rate per variant with its interval in one cell (undefined: a dash)."""
    d = view.drops
    return pd.DataFrame(
        {
            "variant": d["variant"].map(tn.VARIANT_LABELS),
            "shortest (tokens)": d["short"],
            "longest (tokens)": d["long"],
            "questions": d["n"],
            "accuracy, shortest (%)": d["acc_short"].round(1),
            "accuracy, longest (%)": d["acc_long"].round(1),
            "drop rate (%, 95% CI)": [drop_rate_text(r, unit="") for _, r in d.iterrows()],
        }
    )


def needle_tables(view: TagResult, shown: int = 6) -> list:
    """The needle set by kind (in the set, asked here) and its first needle/question pairs."""
    stack = view.stack
    every = tn.load_cases(
        view.params["needle_set"], avoid_text=stack.text, seed=view.params["seed"]
    )
    kinds = (
        tn.needle_set_summary(every)
        .rename(columns={"cases": "in the set"})
        .merge(
            tn.needle_set_summary(stack.cases).rename(columns={"cases": "asked here"}), how="left"
        )
        .fillna(0)
    )
    pairs = pd.DataFrame(
        [
            {"needle": c.needle, "question": c.question, "answer": c.answer, "hop": c.hop}
            for c in stack.cases[:shown]
        ]
    )
    overlap = sum(bool(tn.literal_overlap(c)) for c in every)
    return [kinds, (pairs, f"Needle/question pairs sharing a content word: {overlap}.")]


def tagging_tables(view: TagResult) -> list:
    """Per tagger what it tagged, the LLM tagger's tagged chunks and a spaCy-tagged needle in
    its context."""
    out = [view.stats]
    if view.stack.taggers.llm is not None:
        out.append(
            (llm_tagged_chunks(view.stack, view.params), "Haystack chunks the LLM tagger tagged.")
        )
    needle = tagged_needle(view.params, view.stack)
    if needle is not None:
        out.append("A spaCy-tagged needle in its context:\n\n```text\n" + needle + "\n```")
    return out


def llm_tables(view: TagResult) -> list:
    """The LLM tagger's raw answers for the first needles (nothing without an LLM tagger)."""
    return [llm_answers(view.stack)] if view.stack.taggers.llm is not None else []


def tokens_table(view: TagResult) -> tuple[pd.DataFrame, str]:
    means = view.main.groupby(["variant_label", "length"])[
        ["prompt_tokens", "context_tokens", "tag_tokens"]
    ].mean()
    return means.round(1).reset_index().rename(
        columns={"variant_label": "variant"}
    ), "Mean tokens per prompt."


def overhead_tables(view: TagResult) -> list:
    """Tag overhead against the change over the baseline, and each tagged variant against TD."""
    td = view.against_td
    against = td.assign(
        variant=td["variant"].map(tn.VARIANT_LABELS),
        change=[
            points_ci(c, lo, hi) for c, lo, hi in zip(td["change"], td["ci_low"], td["ci_high"])
        ],
    )
    return [
        view.overhead,
        (
            against[["length", "variant", "change", "p_sign_flip"]]
            .rename(columns={"change": "change vs TD (pts, 95% CI)"})
            .round(3),
            "Each tagged variant against TD alone (what the tags add to their definitions), "
            "paired over needles.",
        ),
    ]


def query_aware_tables(view: TagResult) -> list:
    """Accuracy with the question after vs before and after the context, and each arm's change."""
    if view.qac is None:
        return []
    table, gains = view.qac
    columns = {False: "question after", True: "question before and after"}
    return [
        (
            table.rename(index=tn.VARIANT_LABELS, columns=columns).round(1).reset_index(),
            "Accuracy (%).",
        ),
        (
            pd.DataFrame(
                {
                    "length": gains["length"],
                    "variant": gains["variant"].map(arm_label),
                    "questions": gains["n"],
                    "needles": gains["needles"],
                    "change (pts, 95% CI)": [
                        points_ci(c, lo, hi)
                        for c, lo, hi in zip(gains["change"], gains["ci_low"], gains["ci_high"])
                    ],
                    "p (sign-flip)": gains["p_sign_flip"].map(format_p),
                }
            ),
            "Each arm's change against the baseline with the question after the context, "
            "paired over needles.",
        ),
    ]


def novelqa_tables(view: TagResult, run: Run) -> list:
    """Our NovelQA accuracy by question complexity when ``novelqa_dir`` names a checkout, and
    the paper's Table 2. NovelQA is tagged with spaCy only, as in the paper."""
    params, stack = view.params, view.stack
    theirs = (
        view.paper[view.paper["table"] == 2]
        .pivot_table(index=["model", "variant"], columns="setting", values="value", sort=False)
        .reset_index()
        .assign(variant=lambda t: t["variant"].map(PAPER_VARIANT_LABELS).fillna(t["variant"])),
        "The paper's Table 2 (NovelQA+, accuracy %).",
    )
    if not params.get("novelqa_dir"):
        return [
            "`novelqa_dir` is not set, so the NovelQA part did not run; the paper's Table 2:",
            theirs,
        ]
    questions, books = tn.read_novelqa(resolve(params["novelqa_dir"]))
    requests = tn.novelqa_requests(
        questions,
        books,
        tokenizer=stack.tokenizer,
        variants=[v for v in params["variants"] if v != "td_tc_llm"],
        max_book_tokens=params["novelqa_max_book_tokens"],
        taggers=stack.taggers,
    )
    rows = run.answered("novelqa", lambda: [Block("NovelQA", "novelqa", requests)])
    scored = pd.DataFrame(tn.score_novelqa(rows))
    ours = (
        scored.pivot_table(index="variant", columns="complexity", values="correct") * 100
    ).round(1)
    return [
        (
            ours.rename(index=tn.VARIANT_LABELS).reset_index(),
            "Ours: accuracy (%) by question complexity.",
        ),
        theirs,
    ]


SHORT_LABELS = {"td_tc_system": "TD+TC message, untagged"}  # where the figure's width is short


def sized_differences(view: TagResult) -> pd.DataFrame:
    """Each variant minus the baseline at the sized lengths (needles as the unit), with the
    paper's change for Claude 3.5 Sonnet at the same length (250) or the nearest it reports
    (500 for our long length)."""
    t1 = view.paper[(view.paper["table"] == 1) & (view.paper["model"] == PAPER_MODEL)]
    t1 = t1.set_index(["variant", "setting"])["value"]
    rows = []
    for which, length_key, paper_length in (
        ("short", "short_length", "250"),
        ("long", "long_length", "500"),
    ):
        sized = getattr(view, which)
        if sized is None:
            continue
        for v, g in sized["gains"].iterrows():
            paper = (
                t1[(v, paper_length)] - t1[("baseline", paper_length)]
                if (v, paper_length) in t1.index
                else float("nan")
            )
            rows.append(
                {
                    "label": f"{SHORT_LABELS.get(v, tn.VARIANT_LABELS[v])}, "
                    f"{view.params[length_key]:,} tokens ({int(g.needles)} needles)",
                    "difference": g.change,
                    "ci_low": g.ci_low,
                    "ci_high": g.ci_high,
                    "paper": paper,
                }
            )
    return pd.DataFrame(rows)


@book_figure
def sized_figure(view: TagResult):
    """The sized comparisons: each variant minus the baseline at the short and long lengths,
    clustered by needle, beside the paper's change."""
    return paired_differences(
        sized_differences(view),
        xlabel="Change vs the baseline (points, 95% CI over needles)",
        paper_label=f"paper: {PAPER_MODEL} (250; 500 beside our 2,000)",
    )


class TagNeedles(Chapter):
    """Tagging-augmented generation chapter (needle questions in tagged haystacks)."""

    name = "tag_needles"
    order = 6  # where longctx reproduce runs its headline blocks among the chapters
    notebook = "notebooks/tag_needles.py"
    claim_blocks = {
        "tag-td": ("tokens on every case",),
        "tag-td-definitions": ("tokens on every case",),
        "tag-spacy": ("tokens on every case",),
        "tag-spacy-long": ("tokens, baseline vs",),
        "tag-spacy-tags": ("tokens on every case",),
        "tag-spacy-tags-long": ("tokens, baseline vs",),
    }
    experiments = (
        EXPERIMENT,
        TAG_EXPERIMENT,
    )  # the stores whose rows the chapter offers for download

    def plan(self, run: Run) -> list[Block]:
        return blocks(run.params, run.tokenizer(), run.results, dry_run=run.dry_run)

    def claims(self, run: Run) -> dict[str, Estimate]:
        """The sized comparisons against the untagged baseline, paired by needle (a needle's
        one-hop and two-hop questions are averaged first): TD, TD against its framing without
        definitions, and TD+TC (spaCy) at ``short_length`` (the paper's 250 tokens) and TD+TC (spaCy) at
        ``long_length``, every case of the needle sets at its rotating depth there; and TD+TC
        (spaCy) against TD+TC's system message over an untagged context at both lengths (the
        tags alone). The grid asks
        the short length too, with its cases at other depths; those rows are left out so each
        case counts once, at one depth."""
        params = run.params
        depth_of = sized_depths(params)
        rows = [
            r
            for r in run.rows(EXPERIMENT)
            if depth_of.get(r["example_id"]) == r["condition"]["depth"]
        ]

        def versus(variant, length, control="baseline"):
            base = {"length": length, "query_aware": False}
            return paired_estimate(
                *(
                    by_unit(rows, {**base, "variant": v}, _contains, unit=_needle)
                    for v in (control, variant)
                ),
                side_names=(tn.VARIANT_LABELS[control], tn.VARIANT_LABELS[variant]),
            )

        short, long = params.get("short_length"), params.get("long_length")
        return estimable(
            {
                **(
                    {
                        "tag-td": lambda: versus("td", short),
                        "tag-td-definitions": lambda: versus("td", short, control="framing"),
                        "tag-spacy": lambda: versus("td_tc_spacy", short),
                        "tag-spacy-tags": lambda: versus(
                            "td_tc_spacy", short, control=TAGS_CONTROL
                        ),
                    }
                    if short
                    else {}
                ),
                **(
                    {
                        "tag-spacy-long": lambda: versus("td_tc_spacy", long),
                        "tag-spacy-tags-long": lambda: versus(
                            "td_tc_spacy", long, control=TAGS_CONTROL
                        ),
                    }
                    if long
                    else {}
                ),
            }
        )

    def analyze(self, run: Run) -> TagResult:
        """Everything the chapter shows from its answered parts (:func:`answered`): the grid
        without query-aware prompts (``main``) and its accuracy, gains, drop rates and tag
        overhead, the sized comparisons at ``long_length`` and ``short_length``, the findings
        page's estimates and verdicts, the numbers the prose quotes (``quoted``) and the
        statements it makes (``said``)."""
        params, reader, results_dir = run.params, run.reader, run.results
        seed, scored, stack = params["seed"], answered(run), stacked(run)
        paper = paper_frame("tag_needles")
        grid = scored["grid"]
        main = grid[~grid["query_aware"]]
        overheads, against_td = overhead(main, seed)
        estimates = self.claims(run)
        devices = ", ".join(sorted(set(grid["device"] + " " + grid["dtype"])))
        view = TagResult(
            label=reader.label,
            params=params,
            stack=stack,
            paper=paper,
            grid=grid,
            main=main,
            accuracy=grid_accuracy(main),
            gains=tn.versus_baseline(main),
            drops=tn.drop_rates(main, seed=seed),
            overhead=overheads,
            against_td=against_td,
            stats=tag_stats(stack, params),
            qac=query_aware(grid, params),
            long=sized_comparison(scored["long"], params, paper, "long"),
            short=sized_comparison(scored["short"], params, paper, "short"),
            estimates=estimates,
            verdicts=chapter_verdicts("tag_needles", estimates),
            links=point_links(main, ("model", "variant", "length"), results_dir, EXPERIMENT),
            provenance=(
                f"{provenance(grid, results_dir, EXPERIMENT)} Generated on {devices}, greedy "
                f"decoding, needle set `{params['needle_set']}`, seed {seed}."
            ),
            # One answer per question, variant, length, depth and query placement.
            consistent=(
                len(main) > 0
                and not grid.duplicated(
                    ["example_id", "variant", "length", "depth", "query_aware"]
                ).any()
            ),
        )
        view.quoted = quoted(
            view.main,
            view.gains,
            view.drops,
            view.against_td,
            view.stats,
            view.qac,
            view.long,
            view.short,
            view.estimates,
            params,
        )
        view.quoted.update(novelqa_paper_quotes(paper))
        view.said = statements(view, params)
        return view
