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

from ...claims import Estimate, by_unit, estimable, paired_estimate, paper_frame
from ...runner import Block
from ...tables import point_links, provenance
from ...tasks import tag_needles as tn
from ..contract import Chapter, Run, one_row_each
from . import analysis, design, numbers


class TagNeedles(Chapter):
    """Tagging-augmented generation chapter (needle questions in tagged haystacks)."""

    name = "tag_needles"
    order = 6
    design = design

    answer = staticmethod(numbers.answered)  # the page reads more than the plan's rows

    def plan(self, run: Run) -> list[Block]:
        return design.blocks(run.params, run.tokenizer(), run.results)

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
        depth_of = numbers.sized_depths(params)
        rows = [
            r
            for r in run.rows(design.EXPERIMENT)
            if depth_of.get(r["example_id"]) == r["condition"]["depth"]
        ]

        def versus(variant, length, control="baseline"):
            base = {"length": length, "query_aware": False}
            return paired_estimate(
                *(
                    by_unit(
                        rows, {**base, "variant": v}, numbers.answer_found, unit=numbers.needle_unit
                    )
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
                            "td_tc_spacy", short, control=numbers.TAGS_CONTROL
                        ),
                    }
                    if short
                    else {}
                ),
                **(
                    {
                        "tag-spacy-long": lambda: versus("td_tc_spacy", long),
                        "tag-spacy-tags-long": lambda: versus(
                            "td_tc_spacy", long, control=numbers.TAGS_CONTROL
                        ),
                    }
                    if long
                    else {}
                ),
            }
        )

    def analyze(self, run: Run) -> numbers.TagResult:
        """Everything the chapter shows from its answered parts (:func:`answered`): the grid
        without query-aware prompts (``main``) and its accuracy, gains, drop rates and tag
        overhead, the sized comparisons at ``long_length`` and ``short_length``, the findings
        page's estimates and verdicts, the numbers the prose quotes (``quoted``) and the
        statements it makes (``said``)."""
        params, results_dir = run.params, run.results
        seed, scored, stack = params["seed"], self.answer(run), numbers.stacked(run)
        paper = paper_frame("tag_needles")
        grid = scored["grid"]
        main = grid[~grid["query_aware"]]
        overheads, against_td = numbers.overhead(main, seed)
        estimates = self.claims(run)
        devices = ", ".join(sorted(set(grid["device"] + " " + grid["dtype"])))
        view = numbers.TagResult(
            **self.judged(run, estimates),
            params=params,
            stack=stack,
            paper=paper,
            grid=grid,
            main=main,
            accuracy=numbers.grid_accuracy(main),
            gains=analysis.versus_baseline(main),
            drops=analysis.drop_rates(main, seed=seed),
            overhead=overheads,
            against_td=against_td,
            stats=numbers.tag_stats(stack, params),
            qac=numbers.query_aware(grid, params),
            long=numbers.sized_comparison(scored["long"], params, paper, "long"),
            short=numbers.sized_comparison(scored["short"], params, paper, "short"),
            links=point_links(main, ("model", "variant", "length"), results_dir, design.EXPERIMENT),
            provenance=(
                f"{provenance(grid, results_dir, design.EXPERIMENT)} Generated on {devices}, greedy "
                f"decoding, needle set `{params['needle_set']}`, seed {seed}."
            ),
            # One answer per question, variant, length, depth and query placement.
            consistent=len(main) > 0
            and one_row_each(grid, ["example_id", "variant", "length", "depth", "query_aware"]),
        )
        view.quoted = numbers.quoted(
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
        view.quoted.update(numbers.novelqa_paper_quotes(paper))
        view.said = numbers.statements(view, params)
        return view
