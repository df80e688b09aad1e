"""The effective-length sweep's design and claim on hand-made cases: the same needles at
every length within the reader's window, sized in its own tokens, depths in turn, the claim's
lengths first; the claim pairs each needle's accuracy at half the window with 85% of its own
base; its rule is pre-registered; the ci scale runs and resumes through the runner."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from longctx.chapters.effective_length import design, numbers
from longctx.claims import NoPairedUnits
from longctx.errors import ParameterError
from longctx.metrics import unit_mean
from longctx.models import load_tokenizer
from longctx.reader import Reader
from longctx.runner import block_keys, run, stored
from longctx.tasks import kv_retrieval as kv
from rows import answered_row

ROOT = Path(__file__).resolve().parents[1]
SCALES = json.loads((ROOT / "lib/longctx/scales/effective_length.json").read_text())
SMOKE = "smollm2-135m-instruct"


def params(scale: str = "ci", **overrides) -> dict:
    own = {k: v for k, v in SCALES[scale].items() if k != "extends"}
    return {**SCALES["book"], **own, **overrides}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(SMOKE)


def test_a_needle_keeps_its_gold_pair_and_its_distractors_grow_as_a_prefix(tokenizer):
    needles = kv.sized_needles(3, [250, 1000, 2000], tokenizer, seed=0)
    for i in range(3):
        short, mid, long = (needles[b][i].example for b in (250, 1000, 2000))
        assert short.key == mid.key == long.key and short.value == long.value
        assert (
            long.pairs[: mid.num_pairs] == mid.pairs and mid.pairs[: short.num_pairs] == short.pairs
        )
        for budget, needle in ((250, short), (1000, mid), (2000, long)):
            tokens = kv.records_tokens(tokenizer, needle.pairs)
            assert tokens <= budget and tokens == needles[budget][i].tokens
            wider = kv.sized_needles(i + 1, [budget + 200], tokenizer, seed=0)
            one_more = wider[budget + 200][i].example
            assert kv.records_tokens(tokenizer, one_more.pairs[: needle.num_pairs + 1]) > budget
    again = kv.sized_needles(3, [250, 1000, 2000], tokenizer, seed=0)
    assert again == needles


def test_the_grid_stops_at_the_window_and_cuts_the_context_it_cannot_hold():
    p = params("sweep")
    assert design.grid(p, 8192) == [250, 500, 1000, 2000, 4000, 8000]
    assert design.budget(8000, 8192) == 8192 - design.RESERVE
    assert design.budget(4000, 8192) == 4000
    assert design.claim_length(design.grid(p, 32768), 32768) == 16000
    assert design.claim_length(design.grid(p, 8192), 8192) == 4000
    assert design.claim_length([250, 500, 1000], 1500) is None


def test_every_needle_is_asked_at_every_length_the_claims_lengths_first(tokenizer):
    p = params()
    plan = design.blocks(p, tokenizer, 8192)
    names = [b.name for b in plan]
    claimed = [b for b in plan if b.headline]
    assert names[: len(claimed)] == [b.name for b in claimed]
    # the ci grid stops at 2K: the claim's length (4K for an 8K window, on the claims
    # scale's grid) is not asked, so only the base lengths are the claim's
    assert {b.requests[0].condition["length"] for b in claimed} == {250, 500, 1000}
    claims_plan = design.blocks(params(lengths=[250, 500, 1000, 2000, 4000]), tokenizer, 8192)
    assert {b.requests[0].condition["length"] for b in claims_plan if b.headline} == {
        250,
        500,
        1000,
        4000,
    }
    for kind in p["kinds"]:
        mine = [r for b in plan for r in b.requests if r.condition["needle_kind"] == kind]
        by_length: dict[int, set] = {}
        for r in mine:
            by_length.setdefault(r.condition["length"], set()).add(r.example_id)
            assert r.meta["context_tokens"] <= r.condition["length"] + 64  # a QA needle's own words
        assert len({frozenset(ids) for ids in by_length.values()}) == 1  # the same needles
    kv_rows = [r for b in plan for r in b.requests if r.condition["needle_kind"] == "kv"]
    depths = {r.example_id: r.condition["depth"] for r in kv_rows if r.condition["length"] == 250}
    assert sorted(depths.values()) == sorted(p["depths"])  # 5 needles, one depth each
    assert all(r.condition["depth"] == depths[r.example_id] for r in kv_rows)


def test_bad_parameters_are_one_line_errors():
    with pytest.raises(ParameterError, match="unknown needle kinds"):
        design.check(params(kinds=["kv", "essay"]))
    with pytest.raises(ParameterError, match="NoLiMa's base"):
        design.check(params(lengths=[500, 1000, 2000]))


def _row(kind: str, length: int, example_id: str, right: bool) -> dict:
    gold = "7" if kind == "kv" else "Yuki"
    return {
        "task": "kv_retrieval" if kind == "kv" else "tag_needles",
        "example_id": example_id,
        "condition": {"needle_kind": kind, "length": length},
        "gold": [gold],
        "output": gold if right else "no idea",
    }


def test_the_claim_pairs_half_the_window_with_85_percent_of_each_needles_base():
    rows = []
    for i in range(40):  # base: 8 of 10 right at each base length; 4 of 10 at 4K
        for length in (250, 500, 1000):
            rows.append(_row("kv", length, f"n{i}", i % 10 < 8))
        rows.append(_row("kv", 4000, f"n{i}", i % 10 < 4))
    est = numbers.half_window_estimate(rows, "kv", 4000)
    assert est.n == 40
    assert est.facts["base"] == pytest.approx(80.0)
    assert est.control == pytest.approx(68.0) and est.treatment == pytest.approx(40.0)
    assert est.difference == pytest.approx(-28.0)
    assert est.ci_high < 0
    got = numbers.claims(rows, params("book", kinds=["kv"]), 8192)
    assert set(got) == {"el-kv-half-window"}


def test_a_needles_questions_count_once_and_a_window_too_short_judges_nothing():
    rows = []
    for length in (250, 500, 1000, 4000):
        for hop in ("onehop", "twohop"):  # one needle, two questions: one unit
            rows.append(_row("qa", length, f"needle-1/{hop}", hop == "onehop"))
    est = numbers.half_window_estimate(rows, "qa", 4000)
    assert est.n == 1 and est.facts["base"] == pytest.approx(50.0)
    assert numbers.claims(rows, params("book", kinds=["qa"]), 1500) == {}


def test_the_curve_and_effective_lengths_read_complete_lengths_only():
    rows = [_row("kv", n, f"n{i}", True) for n in (250, 500, 1000, 2000) for i in range(4)]
    rows += [_row("kv", 4000, "n0", False)]  # 4K part run: not in the curve
    table = numbers.scored(rows)
    assert set(numbers.complete_lengths(table)["length"]) == {250, 500, 1000, 2000}
    found = numbers.effective_lengths(table)
    assert found["nolima"].at_least and found["nolima"].length == 2000
    assert numbers.longscores(table) == {250.0: 0.0, 500.0: 0.0, 1000.0: 0.0, 2000.0: 0.0}


def test_the_claims_rules_were_committed_before_any_readers_first_row():
    from longctx import matrix
    from longctx.claims import PREREGISTERED_FILE, read_claims
    from longctx.tables import stored_readers

    # pre-registered, or in the claims file once the chapter joined the book
    listed = read_claims() + read_claims(ROOT / PREREGISTERED_FILE)
    ours = {c.id for c in listed if c.chapter == "effective_length"}
    assert ours == set(design.CLAIM_BLOCKS) == set(numbers.CLAIMS.values())
    dates = matrix.rule_dates()
    assert dates is not None, "git history is needed to date the claims' rules"
    results = ROOT / "data" / "results"
    readers = stored_readers(results, design.EXPERIMENT)
    assert readers, "the sweep's committed rows are read"
    for reader in readers:
        first = matrix.first_row_time(reader, results, design.EXPERIMENT)
        assert all(dates[c] < first for c in ours), reader.label


def test_the_sweep_runs_through_the_runner_and_resumes(tmp_path):
    reader = Reader(SMOKE, "hf", device="cpu", dtype="float32")
    p = params("smoke")
    plan = design.blocks(p, load_tokenizer(SMOKE), 8192)
    run(plan, reader, tmp_path, batch_size=4, progress=False, log=lambda m: None)
    rows = stored(plan, reader, tmp_path)
    assert len(rows) == sum(len(b.requests) for b in plan) == 3 * (2 + 2)
    again = run(plan, reader, tmp_path, batch_size=4, progress=False, log=lambda m: None)
    assert again.missing == 0 and sum(b["generated"] for b in again.blocks) == 0
    assert set(numbers.claims(rows, p, 8192)) == set()  # no length within half the window


def test_a_sweep_is_read_at_its_answered_lengths_and_a_covering_runs_rows_serve(tmp_path):
    reader = Reader(SMOKE, "hf", device="cpu", dtype="float32")
    smoke, tok = params("smoke"), load_tokenizer(SMOKE)
    plan = design.blocks(smoke, tok, 8192)
    for block in plan:  # rows as the runner stores them, no model run
        reader.store(tmp_path, design.EXPERIMENT).append(
            answered_row(key, r, reader=reader)
            for key, r in zip(block_keys(block, reader), block.requests, strict=True)
        )
    rows = stored(plan, reader, tmp_path)
    wider = {**smoke, "lengths": [250, 500, 1000, 2000, 4000]}  # 2K and 4K never answered
    narrower = design.blocks({**smoke, "lengths": [250, 500, 1000]}, tok, 8192)
    full = design.blocks(wider, tok, 8192)
    keys = {k for b in full for k in block_keys(b, reader)}
    assert {k for b in narrower for k in block_keys(b, reader)} <= keys  # prompts per length
    read = numbers.stored_sweep(reader, tmp_path, wider)
    again = numbers.stored_sweep(reader, tmp_path, wider, known=(smoke, rows))
    assert len(read.table) == len(again.table) == len(rows) and read.grid == again.grid
    pd.testing.assert_frame_equal(read.table, again.table)
    assert numbers.covers(smoke, {**smoke, "lengths": [250, 500]})
    assert not numbers.covers(smoke, {**smoke, "lengths": [250, 2000]})
    assert not numbers.covers({**smoke, "claim_only": True}, smoke)
    assert not numbers.covers(smoke, {**smoke, "seed": 1})


def test_the_curve_averages_each_needles_questions_first_and_resamples_needles():
    rows = [_row("qa", 250, "a/onehop", True), _row("qa", 250, "a/twohop", False)]
    rows += [_row("qa", 250, "b/onehop", True)]
    table = numbers.curve_table(numbers.scored(rows))
    (line,) = table.to_dict("records")
    assert line["n"] == 2 and line["accuracy"] == pytest.approx(0.75)  # (0.5 + 1) / 2
    assert line["ci_low"] == pytest.approx(0.5) and line["ci_high"] == pytest.approx(1.0)


def test_the_table_says_how_much_of_the_window_is_used_and_the_figure_draws_it():
    import matplotlib

    matplotlib.use("Agg")

    rows = [
        _row("kv", n, f"n{i}", n <= 1000 or i < 2) for n in (250, 500, 1000, 2000) for i in range(8)
    ]
    table = numbers.scored(rows)
    found = numbers.effective_lengths(table)
    assert found["nolima"].length == 1000 and not found["nolima"].at_least
    grid = [250, 500, 1000, 2000, 4000]
    view = numbers.sweeps({"r": numbers.ReaderSweep(table, 4000, grid)})
    shown = numbers.lengths_table(view)
    nolima = shown[shown["definition"].str.startswith("NoLiMa")].iloc[0]
    assert nolima["share of the window"] == "25% of 4K" and nolima["needles"] == "key-value records"
    assert nolima["lengths measured"] == "250 to 2K of 250 to 4K"
    (line,) = numbers.lengths_lines(view)
    assert "NoLiMa (85% of its own base) 1K [" in line and "window 4K tokens" in line
    marks = numbers.marks(view, "kv")
    assert marks.iloc[0]["length"] == 1000 and marks.iloc[0]["bar"] == found["nolima"].bar
    assert marks.iloc[0]["longest"] == 2000  # a "≥ the longest" band stops at the curve's end
    fig = numbers.figure(view, "kv")
    assert fig.axes[0].get_xscale() == "log"
    text = numbers.figure_text(view, "kv")
    assert "r 1K [" in text.caption and "n = 8" in text.caption


def test_a_curve_stops_at_the_first_length_not_complete_and_a_part_run_is_never_judged():
    rows = [_row("kv", n, f"n{i}", True) for n in (250, 500, 1000, 4000) for i in range(4)]
    table = numbers.scored(rows)
    grid = [250, 500, 1000, 2000, 4000]  # 2K not run: 4K, though complete, is left out
    assert set(numbers.complete_lengths(table, grid)["length"]) == {250, 500, 1000}
    assert set(numbers.complete_lengths(table)["length"]) == {250, 500, 1000, 4000}
    assert numbers.half_window_estimate(rows, "kv", 4000).n == 4
    part = [r for r in rows if not (r["condition"]["length"] == 4000 and r["example_id"] == "n3")]
    with pytest.raises(NoPairedUnits, match="3 of 4 needles"):
        numbers.half_window_estimate(part, "kv", 4000)


def test_the_question_kinds_overlap_with_their_needles_is_measured():
    table = numbers.overlap_table(params()).set_index("needles")
    assert table.loc["key-value records", "sharing a word with the needle (%)"] == 100.0
    assert table.loc["needle questions", "questions"] == 5
    # the project's needle questions were written to share no content word with the needle
    assert table.loc["needle questions", "sharing a word with the needle (%)"] == 0.0


def test_a_units_mean_and_interval_are_the_same_bytes_in_any_order():
    per_unit = pd.Series([0.1, 0.9, 0.3, 0.7, 0.2, 0.0, 1.0, 0.4], index=list("hgfedcba"))
    assert unit_mean(per_unit) == unit_mean(per_unit.sort_index())


def test_the_book_judges_the_claims_only_once_its_lengths_hold_the_default_readers_claim():
    from longctx.chapters import contract

    # the default reader's window is 32K tokens: its claim reads 16K
    assert design.claim_blocks([250, 500, 1000, 2000, 4000, 8000]) == {}
    assert design.claim_blocks([250, 500, 1000, 16000]) == design.CLAIM_BLOCKS
    book = SCALES["book"]["lengths"]
    assert contract("effective_length").claim_blocks == design.claim_blocks(book)
    # what every reader's rows are read at: the run's lengths and the whole claims grid
    widened = design.read_params({"lengths": [250, 500, 1000], "seed": 3})
    assert widened["lengths"] == sorted(set(SCALES["sweep"]["lengths"])) and widened["seed"] == 3


def test_the_half_window_comparison_is_shown_per_reader_with_its_premise_and_direction():
    rows = []
    for i in range(40):  # base: 8 of 10 right at each base length; none at 4K
        for length in (250, 500, 1000):
            rows.append(_row("kv", length, f"n{i}", i % 10 < 8))
        rows += [_row("kv", 2000, f"n{i}", True), _row("kv", 4000, f"n{i}", False)]
    p = {"kinds": ["kv"], "lengths": [250, 500, 1000, 2000, 4000]}
    table = numbers.scored(rows)
    grid = [250, 500, 1000, 2000, 4000, 8000]
    judged = numbers.ReaderSweep(table, 8192, grid, numbers.claims(rows, p, 8192))
    waiting = numbers.ReaderSweep(table, 32768, grid + [16000, 32000])
    view = numbers.sweeps({"small": judged, "large": waiting})
    shown = numbers.half_window_table(view).set_index(["reader", "needles"])
    small = shown.loc["small", "key-value records"]
    assert small["claim's length"] == "4K" and small["base (%)"] == "80.0"
    assert small["difference (pts, 95% CI)"].startswith("-68.0 [")
    assert small["direction"] == "below its bar within half the window"
    assert small["premise"] == "met" and small["n (needles)"] == 40
    large = shown.loc["large", "key-value records"]
    measured = "waits for rows at 16K (measured 250 to 4K of 250 to 32K)"
    assert large["difference (pts, 95% CI)"] == measured
    assert large["premise"] == large["direction"] == ""
    sentence = numbers.answer_sentence(view)
    assert "small of its 8,192-token window: key-value records 2K [" in sentence


def test_longscore_is_shown_as_a_share_of_the_base():
    from longctx.chapters.effective_length.sections import longscore_table

    rows = [
        _row("kv", n, f"n{i}", n < 2000 or i < 2) for n in (250, 500, 1000, 2000) for i in range(4)
    ]
    view = numbers.sweeps(
        {"r": numbers.ReaderSweep(numbers.scored(rows), 4000, [250, 500, 1000, 2000])}
    )
    (line,) = longscore_table(view).to_dict("records")
    assert line["reader"] == "r" and line["250"] == "+0%" and line["2K"] == "-50%"


def test_a_reader_that_finds_nothing_at_its_base_has_no_longscore_but_a_curve():
    rows = [_row("kv", n, f"n{i}", False) for n in (250, 500, 1000, 2000) for i in range(4)]
    view = numbers.sweeps(
        {"r": numbers.ReaderSweep(numbers.scored(rows), 4000, [250, 500, 1000, 2000])}
    )
    assert view.longscores.empty and len(view.curves) == 4
