"""The tagging chapter's numbers: what its analysis computes from the rows (scored rows,
cells, estimates' sides, the numbers the prose quotes and the statements it makes)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...claims import (
    Estimate,
)
from ...metrics import nolima_contains
from ...reader import Reader
from ...report import (
    estimate_text,
    format_p,
    n_for_half_width,
    p_text,
    points_ci,
)
from ...runner import Block, answer
from ...tagging import tagging_report
from ...tasks import tag_needles as tn
from ..contract import ChapterResult, Run
from . import analysis
from .design import (
    EXPERIMENT,
    cases_for,
    long_cases,
    long_requests,
    requests_for,
    short_requests,
    taggers_for,
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


def needle_unit(row: dict) -> str:
    return tn.needle_of(row["example_id"])


def answer_found(row: dict) -> float:
    return nolima_contains(row["output"], row["gold"])


@dataclass
class Haystack:
    """What every part of the chapter shares: the haystack text, the grid's cases, the
    reader's tokenizer and the taggers (LLM tags cached by chunk)."""

    text: str
    cases: list
    tokenizer: object
    taggers: tn.Taggers

    def longest_chunks(self, params: dict) -> list[str]:
        """The chunks of the longest haystack the grid builds (``params["lengths"]``)."""
        return tn.haystack_chunks(
            self.tokenizer,
            max(params["lengths"]),
            strategy=params["chunk_strategy"],
            max_chars=params["chunk_chars"],
            text=self.text,
        )


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
    accuracy = analysis.accuracy_table(main, by=["model", "variant", "length"])
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


def sized_comparison(
    scored: pd.DataFrame, params: dict, paper: pd.DataFrame, which: str
) -> dict | None:
    """The sized comparisons at ``long_length`` (``which="long"``) or ``short_length``: each
    variant against the baseline on every case, with the questions that move each way."""
    if scored.empty:
        return None
    gains = analysis.versus_baseline(scored).set_index("variant")
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
    by_hop = analysis.accuracy_table(scored, by=["variant", "hop"])
    hops = pd.concat([analysis.accuracy_table(scored, by=["variant"]).assign(hop="all"), by_hop])
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
    found = analysis.versus_baseline(both, control=TAGS_CONTROL)
    return next(found[found["variant"] == "td_tc_spacy"].itertuples(), None)


def tag_stats(stack: Haystack, params: dict) -> pd.DataFrame:
    """Per tagger: haystack chunks and needles tagged, tags per tagged chunk, the commonest tags."""
    longest = stack.longest_chunks(params)
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


def by_depth(main: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per variant and needle depth (percent of the context before it), pooled over lengths."""
    table = analysis.accuracy_table(main, by=["model", "variant", "depth"])
    return table.assign(
        depth=(100 * table["depth"]).round().astype(int),
        label=table["variant"].map(tn.VARIANT_LABELS),
    )


def overhead(main: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tag tokens and their share of the context against the change over the baseline, and
    each tagged variant against TD alone."""
    over = analysis.overhead_vs_gain(main)
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
    against_td = analysis.versus_baseline(main[main["variant"] != "baseline"], control="td")
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
    gains = analysis.versus_baseline(rows.assign(variant=rows["arm"]), control="baseline")
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


def drop_rate_text(row, unit: str = "%") -> str:
    """An extremum drop rate with its 95% interval, ``34.8% [5.3, 58.3]`` (a table whose
    header names the unit passes ``unit=""``); undefined with no accuracy at the shortest
    length."""
    rate, low, high = row["drop_rate"], row["ci_low"], row["ci_high"]
    return "undefined" if rate != rate else f"{rate:.1f}{unit} [{low:.1f}, {high:.1f}]"
