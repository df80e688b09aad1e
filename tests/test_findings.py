"""The findings page: the verdict rule on hand-worked cases, every verdict re-derived by the
rule from the table's own estimates (a consistency check, with the library's rule), our
numbers checked against independent scorers written from the papers' metric definitions
(here and in tests/test_findings_scorers.py), and every link target real."""

import json
import re
from pathlib import Path

import pytest

from longctx import claims, findings
from longctx.chapters import Run, contract, get_chapter, scale
from longctx.claims import Claim, Estimate, read_claims, verdict
from longctx.errors import DataFileError
from longctx.reader import Reader
from longctx.runner import Block, block_keys, content_key
from longctx.store import ResultsStore

ROOT = Path(__file__).resolve().parents[1]
MODEL = "qwen2.5-coder-0.5b-instruct"
RESULTS = ROOT / "data" / "results"


def _claim(direction, effect):
    return Claim("x", "p", "kv_retrieval", "kv-headline", "c", "d", "v", direction, effect, "s")


@pytest.mark.parametrize(
    "ci,p,direction,effect,want",
    [
        ((-67.0, -43.0), 0.001, -1, None, "reproduced"),
        ((-67.0, -43.0), 0.001, +1, 10.0, "opposite direction"),
        ((2.0, 9.0), 0.01, -1, -8.1, "opposite direction"),
        ((0.0, 5.8), 0.25, -1, -8.1, "not reproduced"),  # touches 0, rules out the paper's -8.1
        ((-16.0, 9.0), 0.6, +1, 54.4, "not reproduced"),
        ((-4.2, 33.3), 0.3, -1, -2.3, "inconclusive at this n"),
        ((-16.0, 9.0), 0.6, +1, None, "inconclusive at this n"),  # no size to rule out
        # 4 of 40 questions changed, all one way: the bootstrap excludes 0, the exact test
        # cannot (p = 2/16), so no direction is called; the paper's +4.5 is inside.
        ((2.5, 20.0), 0.125, +1, 4.5, "inconclusive at this n"),
        ((2.5, 20.0), 0.125, +1, 30.0, "not reproduced"),
    ],
)
def test_verdict_rule(ci, p, direction, effect, want):
    est = Estimate(sum(ci) / 2, ci[0], ci[1], 50, p, "")
    assert verdict(est, _claim(direction, effect)) == want


def test_paired_estimate_hand_worked():
    control = {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0}
    treatment = {"a": 0.0, "b": 1.0, "c": 0.0, "d": 0.0, "e": 1.0}  # "e" has no control: left out
    est = claims.paired_estimate(control, treatment, side_names=("before", "after"))
    assert est.n == 4 and est.difference == pytest.approx(-50.0)
    assert (
        est.ci_low <= est.difference <= est.ci_high and est.detail == "after 25.0% vs before 75.0%"
    )


@pytest.fixture(scope="module")
def table(committed_findings):
    return committed_findings


def test_every_verdict_follows_the_rule(table):
    """Consistency: each row's verdict is the rule applied to the row's own numbers (the
    independent checks of the numbers are the scorer tests)."""
    listed = read_claims()
    assert len(table) == len(listed) and set(table["verdict"]) <= set(claims.VERDICTS)
    by_id = {c.id: c for c in listed}
    for row in table.itertuples():
        est = Estimate(
            row.difference,
            row.ci_low,
            row.ci_high,
            row.n,
            row.p,
            row.detail,
            row.control,
            row.treatment,
            row.facts,
            side_intervals={
                side: tuple(ci)
                for side, ci in (("control", row.control_ci), ("treatment", row.treatment_ci))
                if ci is not None
            },
        )
        assert row.verdict == verdict(est, by_id[row.id]), row.id
        assert row.ci_low <= row.difference <= row.ci_high, row.id
        assert (row.verdict == "premise not met") == (row.premise_met is False), row.id
        assert (row.verdict == "premise not measured") == (row.premise_met is None), row.id


def test_every_claim_shows_direction_magnitude_and_premise(table):
    markdown = findings.as_markdown(table)
    for row in table.itertuples():
        assert row.direction and row.magnitude, row.id
        assert f"{row.direction}" in markdown and f"Magnitude: {row.magnitude}." in markdown
        if row.premise:
            assert f"Premise: {row.premise}." in markdown, row.id
    # a claim with a premise names it and its value on the page
    assert "closed-book" in markdown and "premise not met" in markdown


def test_every_claim_of_every_paper_is_in_the_table(table):
    """However many papers the claims file holds, each of its claims has a row."""
    listed = read_claims()
    assert list(table["id"]) == [c.id for c in listed]
    assert set(table["paper"]) == {c.paper for c in listed}


def _rows(experiment):
    return ResultsStore(RESULTS, MODEL, experiment).rows()


def test_kv_numbers_match_an_independent_scorer(table):
    """Lost in the Middle's KV metric: the gold value appears in the output, case-insensitive."""
    from longctx.chapters import scale

    # The release file's first records
    records = scale("kv_retrieval", "book")["examples_per_cell"]["140"]
    rows = [
        r
        for r in _rows("kv_retrieval")
        if r["condition"].get("source") == "release-140"
        and not r["condition"]["query_aware"]
        and int(r["example_id"].rsplit("-", 1)[1]) < records
    ]
    hit = {
        (r["example_id"], r["condition"]["gold_index"]): r["gold"][0].lower() in r["output"].lower()
        for r in rows
    }
    first = [hit[(e, 0)] for e, i in hit if i == 0 and (e, 70) in hit]
    middle = [hit[(e, 70)] for e, i in hit if i == 0 and (e, 70) in hit]
    want = 100 * (sum(middle) - sum(first)) / len(first)
    row = table.set_index("id").loc["litm-kv-middle"]
    assert row["n"] == len(first) and row["difference"] == pytest.approx(want)


def test_kv_findings_ignore_records_beyond_the_book_scale(tmp_path, table):
    """An extension in progress (more 140-pair records in the store) must not move the
    findings before the chapter reads those records."""
    committed = ResultsStore(RESULTS, MODEL, "kv_retrieval").rows()
    rows = [dict(r) for r in committed if r["condition"].get("source") == "release-140"]
    # One record beyond the book scale, answered right in the middle and wrong first: it would
    # move both n and the difference.
    extra = [
        next(
            r
            for r in rows
            if r["condition"]["gold_index"] == i and not r["condition"]["query_aware"]
        )
        for i in (0, 70)
    ]
    for k, r in enumerate(extra):
        r["example_id"], r["key"] = "kv-retrieval-140_keys-499", f"beyond-the-book-{k}"
        r["output"] = r["gold"][0] if r["condition"]["gold_index"] == 70 else "no"
    folder = tmp_path / MODEL / "kv_retrieval"
    folder.mkdir(parents=True)
    (folder / "generations.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in [*committed, *extra])
    )
    run = Run.of(contract("kv_retrieval"), Reader(MODEL), "book", tmp_path)
    got = run.chapter.claims(run)["litm-kv-middle"]
    want = table.set_index("id").loc["litm-kv-middle"]
    assert got.n == want["n"] and got.difference == pytest.approx(want["difference"])


def test_a_row_no_plan_asks_for_is_never_counted(tmp_path):
    """A row stored under the key its own content gives passes every store check, yet it
    may answer a prompt the chapter never asks (a forged row, or another plan's, merged in).
    Claims read only the rows of their planned requests: such rows do not move them."""
    committed = ResultsStore(RESULTS, MODEL, "kv_retrieval").rows()
    folder = tmp_path / MODEL / "kv_retrieval"
    folder.mkdir(parents=True)

    def middle_claim(rows):
        (folder / "generations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        run = Run.of(contract("kv_retrieval"), Reader(MODEL), "book", tmp_path)
        return run.chapter.claims(run)["litm-kv-middle"]

    honest = middle_claim(committed)
    forged = []
    for r in committed:  # every middle answer of the claim, asked again with the answer given
        if r["condition"].get("gold_index") == 70 and not r["condition"]["query_aware"]:
            row = {**r, "output": r["gold"][0], "request": {"prompt": f"Say {r['gold'][0]}."}}
            row["key"] = content_key(row)
            forged.append(row)
    assert forged and all(f["key"] not in {r["key"] for r in committed} for f in forged)
    got = middle_claim(committed + forged)
    assert (got.n, got.difference) == (honest.n, honest.difference)


def test_open_domain_numbers_match_an_independent_scorer(table):
    """Lost in the Middle's QA metric written out again: lowercase, drop punctuation and the
    words a/an/the, then look for a gold answer in the first line. 50 minus 20 documents."""
    import string

    from longctx.chapters import scale

    def norm(text):
        text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
        return " ".join(w for w in text.split() if w not in {"a", "an", "the"})

    n = scale("multidoc_qa", "book")["open_domain_questions"]
    keep = {f"nq-{i:04d}" for i in range(n)}
    hit = {
        (r["example_id"], r["condition"]["k"]): any(
            norm(g) in norm(r["output"].split("\n")[0]) for g in r["gold"]
        )
        for r in _rows("open_domain")
        if r["example_id"] in keep
    }
    both = [e for e in keep if (e, 20) in hit and (e, 50) in hit]
    want = 100 * (sum(hit[(e, 50)] for e in both) - sum(hit[(e, 20)] for e in both)) / len(both)
    row = table.set_index("id").loc["litm-open-domain"]
    assert row["n"] == len(both) == n and row["difference"] == pytest.approx(want)


def test_crossing_main_effects_equal_the_gee_fit(table):
    """In the balanced half fraction the paired high-minus-low difference per question is the
    GEE main effect of the chapter's model (fitted on all six factors and their interactions)."""
    from longctx.chapters import crossing as chapter
    from longctx.chapters import scale
    from longctx.chapters.crossing import factorial as X
    from longctx.tables import rows_table
    from longctx.tasks import multidoc_qa as qa

    design = chapter.design.factorial_design(scale("crossing", "book"))
    keep = {q.example_id for q in qa.read_oracle(limit=scale("crossing", "book")["num_questions"])}
    fx = X.effects(
        rows_table([r for r in _rows("crossing") if r["example_id"] in keep], qa.score), design
    ).set_index("term")
    by_id = table.set_index("id")
    for f in ("position", "format", "tags", "distractors", "filler"):
        assert by_id.loc[f"crossing-{f}", "difference"] == pytest.approx(fx.loc[f, "estimate"]), f
        assert by_id.loc[f"crossing-{f}", "n"] == scale("crossing", "book")["num_questions"]


def test_gsm8k_numbers_match_an_independent_scorer(table):
    """Accuracy = the last number after "answer is" (else the last number) equals the #### answer."""
    answers = {}
    for k, line in enumerate(
        (ROOT / "data" / "public" / "gsm8k-test.jsonl").read_text().splitlines()
    ):
        answers[f"gsm8k-{k}"] = (
            json.loads(line)["answer"].split("####")[-1].strip().replace(",", "")
        )

    def correct(output, gold):
        found = re.findall(
            r"answer is[:\s*$\\{}boxed]*(-?\d[\d,]*(?:\.\d+)?)", output, flags=re.I
        ) or re.findall(r"-?\d[\d,]*(?:\.\d+)?", output)
        return bool(found) and float(found[-1].replace(",", "")) == float(gold)

    from longctx.chapters import scale

    keep = {
        p.id
        for p in get_chapter("length_alone").design.problems_for(scale("length_alone", "book"))[
            "gsm8k"
        ]
    }
    rows = [
        r
        for r in _rows("length_alone")
        if r["example_id"] in keep
        and r["condition"]["subtask"] == "gsm8k"
        and r["condition"]["mode"] == "solve"
    ]
    short = {
        r["example_id"]: correct(r["output"], answers[r["example_id"]])
        for r in rows
        if r["condition"]["filler_tokens"] == 0
    }
    essay = {
        r["example_id"]: correct(r["output"], answers[r["example_id"]])
        for r in rows
        if r["condition"]["filler"] == "essay" and r["condition"]["filler_tokens"] == 16000
    }
    want = 100 * (sum(essay.values()) - sum(short[k] for k in essay)) / len(essay)
    assert table.set_index("id").loc["la-essay", "difference"] == pytest.approx(want)


@pytest.mark.parametrize("subtask", ["qa1", "qa2"])
def test_ruler_numbers_match_an_independent_scorer(table, subtask):
    """RULER's string_match_part: some gold answer, lower-cased, inside the lower-cased output."""
    rows = [
        r
        for r in _rows("ruler_qa")
        if r["condition"]["subtask"] == subtask and r["condition"]["length"] == 4000
    ]
    asked = {r["example_id"] for r in rows if r["condition"]["mode"] == "answer"}
    by_mode = {
        m: {
            r["example_id"]: any(g.lower() in r["output"].lower() for g in r["gold"])
            for r in rows
            if r["condition"]["mode"] == m
        }
        for m in ("answer", "retrieve_then_answer")
    }
    both = sorted(set(by_mode["answer"]) & set(by_mode["retrieve_then_answer"]))
    want = (
        100
        * sum(by_mode["retrieve_then_answer"][k] - by_mode["answer"][k] for k in both)
        / len(both)
    )
    got = table.set_index("id").loc[f"la-ruler-{subtask}"]
    assert got["difference"] == pytest.approx(want) and got["n"] == len(both) == len(asked)


def test_every_link_target_is_a_section_of_its_chapter(table):
    for row in table.itertuples():
        source = (ROOT / "notebooks" / f"{row.chapter}.py").read_text()
        assert f"# ({row.label})=" in source, f"{row.chapter} has no section labelled {row.label}"
    markdown = findings.as_markdown(table)
    assert markdown.count("{ref}`section <") == len(table)


def test_intervals_wider_than_the_precision_target_are_marked(table):
    # Rounds to 10.0: meets it
    row = table.iloc[[0]].assign(difference=-20.0, ci_low=-30.04, ci_high=-10.0)
    assert "†" not in findings.as_markdown(row)
    marked = findings.as_markdown(row.assign(ci_low=-30.2))
    assert marked.count("†") == 2 and "Under-powered: its interval is wider than ±10" in marked


def test_cnorm_token_claims_on_hand_made_rows(tmp_path):
    """Figure 3's claim is Pearson r over delimiters (tokens against accuracy); the four
    longest minus four shortest contrast is exploratory. Rows where only the four shortest
    formats answer: r by hand, and the contrast -100 points."""
    import numpy as np

    from longctx.chapters import cnorm as chapter
    from longctx.chapters import scale

    params = scale("cnorm", "book")
    _, sweep = chapter.design.kv_requests(params)
    tokens = {d: 100 + i for i, d in enumerate(sorted({r.condition["delimiter"] for r in sweep}))}
    order = sorted(tokens, key=tokens.get)
    short = set(order[: len(order) // 2])
    reader = Reader(MODEL)
    keys = block_keys(Block("the sweep", chapter.design.KV, sweep), reader)
    rows = [
        {
            "key": keys[i],
            "task": r.task,
            "example_id": r.example_id,
            "condition": r.condition,
            "gold": list(r.gold),
            "prompt_tokens": tokens[r.condition["delimiter"]],
            "output": r.gold[0] if r.condition["delimiter"] in short else "no idea",
        }
        for i, r in enumerate(sweep)
    ]
    # A row outside the sweep (another size) must not count.
    outside = {**rows[0], "key": "outside", "prompt_tokens": 1, "output": "no idea"}
    outside["condition"] = {**sweep[0].condition, "num_pairs": 16}
    folder = tmp_path / MODEL / "cnorm_kv"
    folder.mkdir(parents=True)
    (folder / "generations.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in [*rows, outside])
    )
    run = Run.of(contract("cnorm"), reader, "book", tmp_path)
    est = run.chapter.claims(run)["cnorm-tokens"]
    x = [tokens[d] for d in order]
    y = [100.0 if d in short else 0.0 for d in order]
    assert est.n == len(order) and est.difference == pytest.approx(np.corrcoef(x, y)[0, 1])
    contrast = chapter.numbers.format_contrast(chapter.numbers.swept_rows(rows + [outside], params))
    assert contrast.difference == -100.0 and contrast.n == len({r.example_id for r in sweep})
    assert contrast.detail == "4 longest formats 0.0% vs 4 shortest formats 100.0%"


@pytest.mark.parametrize(
    "variant,control,claim",
    [
        ("td", "baseline", "tag-td"),
        ("td", "framing", "tag-td-definitions"),
        ("td_tc_spacy", "baseline", "tag-spacy"),
    ],
)
def test_tag_short_numbers_match_an_independent_scorer(table, variant, control, claim):
    """NoLiMa's contains (a gold answer as a case-sensitive substring of the output) at 250
    tokens, on the sized rows only: every headline needle case at its rotating depth in the
    headline list (case i at depths[i % 5]), not the 30-case grid's rows at other depths;
    averaged per needle (its one-hop and two-hop questions share it), then differenced."""
    from longctx.chapters import scale
    from longctx.chapters import tag_needles as chapter
    from longctx.tasks import tag_needles as tn

    params = scale("tag_needles", "book")
    cases = chapter.design.long_cases(params, tn.haystack_text())
    depth_of = {c.id: params["depths"][i % len(params["depths"])] for i, c in enumerate(cases)}
    hit = {
        (r["example_id"], r["condition"]["variant"]): any(g in r["output"] for g in r["gold"])
        for r in _rows("tag_needles")
        if r["condition"]["length"] == 250
        and not r["condition"]["query_aware"]
        and r["condition"]["depth"] == depth_of.get(r["example_id"])
    }
    both = [c.id for c in cases if (c.id, control) in hit and (c.id, variant) in hit]
    needles: dict = {}
    for e in both:
        needles.setdefault(e.rsplit("/", 1)[0], []).append(hit[(e, variant)] - hit[(e, control)])
    want = 100 * sum(sum(d) / len(d) for d in needles.values()) / len(needles)
    row = table.set_index("id").loc[claim]
    assert len(both) == len(cases) == 154
    assert row["n"] == len(needles) == 87 and row["difference"] == pytest.approx(want)


def test_crossing_chapter_and_findings_print_the_same_intervals(table):
    """The chapter's per-question contrasts (its forest and tables) and the findings page's
    paired estimates are one computation: the same effect, interval and p for every factor."""
    from longctx.chapters import crossing as chapter
    from longctx.chapters.crossing import factorial as X
    from longctx.tables import rows_table
    from longctx.tasks import multidoc_qa as qa

    params = scale("crossing", "book")
    keep = {q.example_id for q in qa.read_oracle(limit=params["num_questions"])}
    rows = [r for r in _rows("crossing") if r["example_id"] in keep]
    fx = X.contrast_effects(
        rows_table(rows, qa.score), chapter.design.factorial_design(params)
    ).set_index("term")
    by_id = table.set_index("id")
    for f in ("position", "format", "tags", "distractors", "filler", "query_aware"):
        mine, theirs = fx.loc[f], by_id.loc[f"crossing-{f}"]
        for a, b in (("estimate", "difference"), ("ci_low", "ci_low"), ("ci_high", "ci_high")):
            assert mine[a] == pytest.approx(theirs[b]), (f, a)
        assert mine["p"] == pytest.approx(theirs["p"]), f
    assert (fx["kind"] == "interaction").sum() == 15 and fx["p_holm"].ge(fx["p"]).all()


def test_each_chapter_opens_with_its_verdicts():
    """Every chapter glues its verdict box and shows it under its title; the box lists each
    of the chapter's claims with its verdict and a link to its section."""
    from longctx.claims import Estimate

    chapters = {c.chapter for c in read_claims()}
    for name in chapters:
        source = (ROOT / "notebooks" / f"{name}.py").read_text()
        title = source.index("\n# # ")
        assert source.index(f"{{glue:md}} {name}-verdicts") - title < 200, name
        assert "page.analyze(run)" in source, name  # which glues the verdict box
    from longctx import matrix
    from longctx.reader import Reader

    claims = [c for c in read_claims() if c.chapter == "multidoc_qa"]
    col = matrix.column_of(Reader(), ROOT / "data" / "results")
    est = {"litm-qa-u-shape": Estimate(-10.7, -17.0, -4.0, 150, 0.0024, "", 41.3, 30.7)}
    table = matrix.build(ROOT / "data" / "results", claims, only=[col], given={col.folder: est})
    box = matrix.verdict_box("multidoc_qa", table)
    assert box.startswith("::::{admonition} Verdicts, one column per model with rows")
    assert "reproduced" in box and "{ref}`data <multidoc-headline>`" in box
    assert box.count("\n| ") == 1 + len(claims)  # header and every claim of the chapter
    # on a narrow screen the same cells as a card per claim, in the table's place
    assert ":class: longctx-wide-only" in box and ":::{div} longctx-narrow-only" in box
    cards = box.split(":::{div} longctx-narrow-only")[1]
    assert cards.count("\n**") == len(claims)
    assert "-10.7 [-17.0, -4.0]" in box and "not run" in box  # the others have no estimate
    empty = matrix.Matrix(claims, [])
    assert "No claim" in matrix.verdict_box("multidoc_qa", empty)


def test_the_record_of_verdict_moves_is_current(table, tmp_path):
    changes = findings.verdict_changes(table)
    assert set(changes["claim"]) <= set(table["id"])
    moved = findings.moves_markdown(changes)
    assert "premise not met" in moved and "\n\n| date | reader | claim |" in moved
    assert (
        moved.startswith('<details class="longctx-details"><summary>') and "newest first" in moved
    )
    # claims named in words, not ids
    assert "`" not in moved and "LitM QA: middle - edges" in moved
    # a verdict that moves without its entry fails, naming the claim
    path = tmp_path / "changes.csv"
    changes[changes["claim"] != "litm-kv-middle"].to_csv(path, index=False)
    with path.open("a") as f:
        f.write(
            "2026-11-27,qwen2.5-coder-0.5b-instruct,litm-kv-middle,,opposite direction,"
            "a move with no reason\n"
        )
    with pytest.raises(DataFileError, match="litm-kv-middle"):
        findings.verdict_changes(table, path)


def test_tag_chapter_tables_print_the_findings_pages_sides(table):
    """One unit per row: the chapter's sized tables give each side as a mean over needles,
    the unit of their change and interval, so the sides are the findings page's."""
    from longctx.chapters import Run, contract
    from longctx.chapters import tag_needles as chapter
    from longctx.claims import paper_frame

    # Tags and rows are stored: no model loads.
    run = Run.of(contract("tag_needles"), Reader(), "book", ROOT / "data" / "results")
    scored, params = contract("tag_needles").answer(run), run.params
    paper = paper_frame("tag_needles")
    by_id = table.set_index("id")
    for which, claim in (("short", "tag-spacy"), ("long", "tag-spacy-long")):
        sized = chapter.numbers.sized_comparison(scored[which], params, paper, which)["table"]
        row = sized.set_index("comparison").loc["TD+TC (spaCy) minus baseline"]
        want = by_id.loc[claim]
        assert row["accuracy over needles (%)"] == (
            f"{want['treatment']:.1f} vs {want['control']:.1f}"
        ), claim
        assert row["needles (questions)"].startswith(f"{want['n']} (")


def test_the_books_citation_names_its_version_date_and_commit():
    import re

    from longctx import __version__
    from longctx.page import book_citation
    from longctx.paths import build_commit, build_date

    bib = book_citation()
    assert bib.startswith("```bibtex\n@misc{longctx2026,") and bib.rstrip().endswith("```")
    assert f"version = {{{__version__}}}" in bib and f"date    = {{{build_date()}}}" in bib
    assert f"built from commit {build_commit()}" in bib
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}|undated", build_date())


def test_a_readers_analyses_are_kept_and_recomputed_exactly_when_their_rows_change(
    tmp_path, monkeypatch
):
    """`longctx findings` re-ran every chapter's analysis from the rows each time. Each
    chapter's estimates of a reader are now kept, keyed by its parameters, the reader, the
    code and data, and the bytes of every store it read: a changed row recomputes that
    chapter for that reader alone, and its cell moves."""
    import lzma
    import shutil

    monkeypatch.setenv("LONGCTX_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "results"
    readers = {m: Reader(m) for m in ("qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct")}
    for model in readers:
        shutil.copytree(
            ROOT / "data/results" / model / "kv_retrieval", root / model / "kv_retrieval"
        )
    kv_claims = [c for c in read_claims() if c.chapter == "kv_retrieval"]
    ran: list[str] = []
    from longctx.chapters import contract

    chapter_class = type(contract("kv_retrieval"))
    real = chapter_class.claims

    def counted(self, run):
        ran.append(run.reader.model)
        return real(self, run)

    monkeypatch.setattr(chapter_class, "claims", counted)

    def both():
        return {m: findings.estimates(root, kv_claims, r, "claims") for m, r in readers.items()}

    first = both()
    assert sorted(ran) == sorted(readers)
    again = both()
    assert sorted(ran) == sorted(readers)  # nothing recomputed
    assert {m: {k: e.difference for k, e in v.items()} for m, v in again.items()} == {
        m: {k: e.difference for k, e in v.items()} for m, v in first.items()
    }
    # one row of the 1.5B: its first right answer with the gold pair in the middle made wrong
    small = "qwen2.5-coder-1.5b-instruct"
    store = ResultsStore(root, small, "kv_retrieval")
    rows = store.rows()
    middle = next(
        r
        for r in rows
        if r["condition"]["num_pairs"] == 140
        and not r["condition"]["query_aware"]
        and r["condition"]["gold_index"] > 0
        and kv_score(r) == 1.0
    )
    middle["output"] = "no idea"
    store.packed_path.write_bytes(
        lzma.compress("".join(json.dumps(r) + "\n" for r in rows).encode())
    )
    ran.clear()
    moved = both()
    assert ran == [small]  # the other reader's analysis was kept
    cell = "litm-kv-middle"
    assert moved[small][cell].treatment < first[small][cell].treatment


def test_a_readers_effective_length_sweep_is_read_once_until_its_rows_change(tmp_path, monkeypatch):
    """The findings page and `longctx findings` read each reader's sweep through its own
    plan (its tokenizer's lengths); that read is kept like a chapter's analysis."""
    import shutil

    monkeypatch.setenv("LONGCTX_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "results"
    small = "smollm2-135m-instruct"
    shutil.copytree(
        ROOT / "data/results" / small / "effective_length", root / small / "effective_length"
    )
    ran: list[str] = []
    real = findings.stored_sweep

    def counted(reader, results_dir, params):
        ran.append(reader.model)
        return real(reader, results_dir, params)

    monkeypatch.setattr(findings, "stored_sweep", counted)
    first = findings.effective_lengths(root)
    again = findings.effective_lengths(root)
    assert ran == [small] and first.readers == again.readers == [Reader(small).label]
    assert first.curves.equals(again.curves)
    store = ResultsStore(root, small, "effective_length")
    rows = store.rows()
    store.append([{**rows[0], "key": "another-request", "output": "changed"}])
    findings.effective_lengths(root)
    assert ran == [small, small]


def kv_score(row):
    from longctx.tasks import kv_retrieval as kv

    return kv.score(row)


def test_a_cell_sits_on_the_scale_of_the_papers_effect_or_in_points_toward_its_direction():
    from longctx.claims import Claim
    from longctx.matrix import effect_scale

    def claim(direction, effect, kind="directional", margin=None):
        return Claim(
            "x", "p", "ch", "l", "c", "d", "v", direction, effect, "s", "short", kind, margin
        )  # fmt: skip

    # a loss the paper sizes at -15.7: half of it is 0.5, the interval kept in order
    panel, x, lo, hi, label, margin = effect_scale(claim(-1, -15.7), -7.85, -15.7, 0.0)
    assert (panel, x, lo, hi, margin) == ("ratio", 0.5, 0.0, 1.0, None)
    assert label == "short (paper -15.7)"
    # no size in the paper: points, signed so that its direction (a loss) is positive
    assert effect_scale(claim(-1, None), -6.0, -9.0, -3.0)[:4] == ("points", 6.0, 3.0, 9.0)
    # a claim of no effect: points, with its margin, even where the paper gives a number
    assert effect_scale(claim(1, 1.5, "saturation", 5.0), 2.0, -1.0, 5.0)[::5] == ("points", 5.0)


def test_the_matrix_figure_draws_each_judged_cell_and_the_cards_hold_every_claim(committed_matrix):
    from longctx import matrix

    fig = matrix.figure(committed_matrix)
    text = matrix.figure_text(committed_matrix)
    judged = matrix.figure_cells(committed_matrix)
    judged = judged[(judged["status"] == "judged") & judged["x"].notna()]
    assert f"Interval plot of {len(judged)} judged cells" in text.alt
    # every judged cell is one interval line in one of the two panels
    lines = sum(len([ln for ln in ax.lines if len(ln.get_xdata()) == 2]) for ax in fig.axes)
    assert lines >= len(judged)
    cards = matrix.cards_markdown(committed_matrix)
    assert cards.startswith('<details class="longctx-details longctx-narrow">')
    assert cards.count("\n**") == len(committed_matrix.claims)


def test_the_effective_lengths_section_reads_each_readers_sweep_through_its_own_plan(capsys):
    from longctx.chapters.effective_length import numbers as sweep
    from longctx.cli import main

    lengths = findings.effective_lengths(RESULTS)
    small = "smollm2-135m-instruct"
    assert small in lengths.readers and lengths.windows[small] == 8192
    assert {kind for reader, kind in lengths.found if reader == small} == {"kv", "qa"}
    table = sweep.lengths_table(lengths)
    assert set(table["definition"]) == set(sweep.DEFINITION_NAMES.values())
    assert all(m.startswith("250 to ") for m in table["lengths measured"])
    # the command line prints the same lengths for the reader it is given
    assert main(["findings", "--model", small]) == 0
    printed = capsys.readouterr().out
    assert all(line in printed for line in sweep.lengths_lines(lengths) if f"({small})" in line)
    bounds = findings.bounds_lines(findings.length_bounds_table(RESULTS))
    assert all(line in printed for line in bounds if f"({small})" in line)
    assert any(f"({small})" in line for line in bounds)


def test_the_chapters_lengths_bound_the_default_readers_effective_length():
    bounds = findings.length_bounds_table(RESULTS).set_index(["reader", "task"])
    kv = bounds.loc[("qwen2.5-coder-0.5b-instruct", "key-value records")]
    # its 140-pair records (first and middle) sit far below 85% of its 10-pair accuracy
    assert kv["below"].startswith("< ") and "140 pairs" in kv["accuracy by length (%, 95% CI)"]
    gsm = bounds.loc[("qwen2.5-coder-0.5b-instruct", "GSM8K, essay padding")]
    # 97% of problems solved without padding, 57% with essay padding: far below 85% of it
    assert gsm["accuracy by length (%, 95% CI)"].startswith("no padding, ")
    assert gsm["below"].startswith("< ") and gsm["at least"] == "none"
