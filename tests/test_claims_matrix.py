"""What a reader's claims cost and the claims x readers matrix: the claims scale's dry run
counts prompt tokens with the reader's own tokenizer, says which claims fit its window, and
writes the plan the findings matrix reads."""

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from commands import run_cli
from longctx import matrix
from longctx.chapters import Run, contract, get_chapter, scale
from longctx.claims import Estimate, judge, read_claims
from longctx.errors import LongctxError
from longctx.matrix import Cell, Column, cell_markdown
from longctx.reader import Reader
from longctx.runner import PromptTokens, block_keys
from longctx.store import ResultsStore
from rows import stored_row

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = "qwen2.5-coder-0.5b-instruct"
IDS = {c.id for c in read_claims()}


def test_prompt_tokens_counted_without_weights_match_the_stored_rows():
    """The dry run's count is the count the backend made when it generated the rows."""
    reader = Reader(DEFAULT)
    count = PromptTokens(reader)
    params = scale("semantic_competition", "claims")
    block = get_chapter("semantic_competition").design.blocks(params)[0]
    stored = {r["key"]: r for r in reader.store(ROOT / "data" / "results", block.experiment).rows()}
    pairs = list(zip(block.requests, block_keys(block, reader)))[:12]
    assert pairs and all(k in stored for _, k in pairs)
    assert [count(r.prompt, r.system) for r, _ in pairs] == [
        stored[k]["prompt_tokens"] for _, k in pairs
    ]
    assert count.window == 32768


def test_claims_dry_run_writes_what_each_claim_costs_and_whether_it_fits(tmp_path):
    done = run_cli(
        "reproduce",
        "--scale",
        "claims",
        "--chapters",
        "kv_retrieval",
        "semantic_competition",
        "--model",
        "smollm2-135m-instruct",
        "--results-dir",
        str(tmp_path),
        "--dry-run",
    )
    assert done.returncode == 0, done.stderr
    assert "does not fit: " in done.stdout and "8,192" in done.stdout
    assert "prompt tokens/s, decoding included, measured by scripts/bench_readers.py" in done.stdout
    plan = json.loads((tmp_path / "smollm2-135m-instruct" / "claims-plan.json").read_text())
    claims = plan["claims"]
    assert plan["window"] == 8192 and plan["backend"] == "hf"
    assert not claims["litm-kv-middle"]["fits"] and claims["litm-kv-middle"]["requests"] == 330
    assert claims["litm-kv-query-aware"]["requests"] == 660
    sc = claims["sc-far-minus-hard"]
    assert sc["fits"] and sc["requests"] == 600 and sc["stored"] == 0
    assert sc["prompt_tokens"] == sc["missing_prompt_tokens"] > 600 * 500
    assert sc["estimated_seconds"] > 0


def test_the_claims_scale_gives_the_default_reader_the_book_scales_numbers(committed_findings):
    """The matrix reads the claims scale, the chapters the book scale: for the default reader
    they must be the same estimates, so the two pages cannot disagree."""
    from longctx.findings import estimates

    lean = estimates(ROOT / "data" / "results", read_claims(), scale_name="claims")
    book = committed_findings.set_index("id")
    for claim, est in lean.items():
        row = book.loc[claim]
        assert (est.difference, est.ci_low, est.ci_high, est.n, est.p, est.detail) == (
            row["difference"], row["ci_low"], row["ci_high"], row["n"], row["p"], row["detail"]
        ), claim  # fmt: skip
    assert set(lean) == set(book.index)


def _copy_store(src_folder, experiment, root, folder, **changes):
    """``src_folder``'s rows of ``experiment`` stored under ``folder``, with ``changes``. Rows
    that name another model are stored under the keys that model's requests have (the
    semantic-competition plans of both scales), as if it had answered them: claims count a
    row only under a planned request's key."""
    rows = ResultsStore(ROOT / "data" / "results", src_folder, experiment).rows()
    rows = [{**r, **changes} for r in rows]
    if changes.get("model", src_folder) != src_folder:
        rekey = _keys_for(Reader(src_folder), Reader(changes["model"]))
        rows = [{**r, "key": rekey.get(r["key"], r["key"])} for r in rows]
    ResultsStore(root, folder, experiment).append(rows)
    return rows


def _keys_for(source: Reader, target: Reader) -> dict[str, str]:
    """Each semantic-competition request's key for ``source`` -> its key for ``target``."""
    chapter = get_chapter("semantic_competition")
    out = {}
    for name in ("book", "claims"):
        for block in chapter.design.blocks(scale("semantic_competition", name)):
            out.update(zip(block_keys(block, source), block_keys(block, target)))
    return out


def test_a_new_readers_rows_add_a_column_with_no_code_change(tmp_path):
    _copy_store(DEFAULT, "semantic_competition", tmp_path, DEFAULT)
    before = matrix.build(
        tmp_path, [c for c in read_claims() if c.chapter == "semantic_competition"]
    )
    assert [c.folder for c in before.columns] == [DEFAULT]
    # the same rows as if another reader (gemma3-270m) had made them, after the rules
    future = "2099-01-01T00:00:00+0000"
    _copy_store(
        DEFAULT,
        "semantic_competition",
        tmp_path,
        "gemma3-270m",
        model="gemma3-270m",
        model_fingerprint="gemma3-270m@test",
        created=future,
    )
    claims = [c for c in read_claims() if c.chapter == "semantic_competition"]
    after = matrix.build(tmp_path, claims)
    assert [c.folder for c in after.columns] == [DEFAULT, "gemma3-270m"]
    for claim in claims:
        old, new = after.cell(claim.id, DEFAULT), after.cell(claim.id, "gemma3-270m")
        assert new.status == old.status == "judged"
        assert new.estimate == old.estimate and new.judgement == old.judgement
        # the rule predates 2099 but not the default reader's rows of 2026-11-22
        assert new.preregistered is True and old.preregistered is False
    text = matrix.as_markdown(after)
    assert "gemma3-270m" in text and "‡" in text
    assert matrix.tally_table(after)["reader"].tolist() == [DEFAULT, "gemma3-270m"]
    # the introduction's summary: both readers agree on every claim, so the claims the
    # default reader reproduces are reproduced on 2 of 2 readers
    summary = matrix.summary(after)
    assert summary["intro-readers"] == 2 and summary["intro-claims"] == len(claims)
    reproduced = [
        c
        for c in claims
        if (cell := after.cell(c.id, DEFAULT)).judgement.verdict == "reproduced" and cell.decided
    ]
    assert summary["intro-default-judged"] == len(claims)
    assert reproduced and all(
        f"{c.claim[1:].rstrip('.')} (reproduced, and stably, on 2 of the 2 models that judge it)"
        in summary["intro-robust"]
        for c in reproduced[:3]
    )


def test_the_readers_variable_keeps_only_the_columns_it_names(tmp_path, monkeypatch):
    claims = [c for c in read_claims() if c.chapter == "semantic_competition"]
    for folder in (DEFAULT, "gemma3-270m"):
        _copy_store(DEFAULT, "semantic_competition", tmp_path, folder, model=folder)
    monkeypatch.setenv(matrix.READERS_ENV, " gemma3-270m ")
    assert [c.folder for c in matrix.columns(tmp_path, claims)] == ["gemma3-270m"]
    monkeypatch.setenv(matrix.READERS_ENV, "gemma3-270m,nobody")
    with pytest.raises(LongctxError, match="names nobody, which have no claim rows"):
        matrix.columns(tmp_path, claims)


def test_part_of_a_claims_units_is_running_never_judged(tmp_path):
    rows = _copy_store(DEFAULT, "semantic_competition", tmp_path, DEFAULT)
    claims = [c for c in read_claims() if c.chapter == "semantic_competition"]
    few = sorted({r["example_id"] for r in rows})[:30]
    rekey = _keys_for(Reader(DEFAULT), Reader("gemma3-270m"))
    part = [
        {**r, "model": "gemma3-270m", "model_fingerprint": "g@t", "key": rekey[r["key"]]}
        for r in rows
        if r["example_id"] in few and r["key"] in rekey
    ]
    ResultsStore(tmp_path, "gemma3-270m", "semantic_competition").append(part)
    cells = matrix.build(tmp_path, claims).column_cells("gemma3-270m")
    assert {c.status for c in cells} == {"running"}
    assert all(c.judgement is None and "units stored" in c.note for c in cells)


def test_a_premise_whose_rows_are_part_stored_leaves_the_cell_running(tmp_path):
    """Every solve row of the length-alone claims, but a recitation for only some problems:
    the premise is not measured, so the cell is part run, never judged from the subset."""
    rows = [
        r
        for r in ResultsStore(ROOT / "data" / "results", DEFAULT, "length_alone").rows()
        if r["condition"]["mode"] != "recite"
    ]
    ResultsStore(tmp_path, DEFAULT, "length_alone").append(rows)
    run = Run.of(contract("length_alone"), Reader(DEFAULT), "recitation-full", tmp_path)
    block = next(b for b in run.planned() if b.name == "recite gsm8k mask between 16000")
    asked = list(zip(block.requests, block_keys(block, Reader(DEFAULT))))[:5]
    recited = [
        {**rows[0], "key": key, "example_id": req.example_id, "condition": req.condition}
        for req, key in asked
    ]
    ResultsStore(tmp_path, DEFAULT, "length_alone").append(recited)
    claims = [c for c in read_claims() if c.id in ("la-mask", "la-before")]
    built = matrix.build(tmp_path, claims)
    mask, before = (built.cell(c, DEFAULT) for c in ("la-mask", "la-before"))
    assert mask.status == "premise not measured" and mask.judgement is None
    assert mask.estimate.n == 120 and "recited not measured yet" in mask.note
    # the cell and the list under the matrix name the command that stores the recitations
    fill = f"longctx reproduce --scale recitation-full --model {DEFAULT} --chapters length_alone"
    assert mask.note.endswith(fill) and f"1 premise to measure, `{fill}`" in (
        matrix.commands_markdown(built)
    )
    assert "◌ premise not measured" in matrix.cell_markdown(mask) and not mask.decided
    assert before.status == "judged"  # its premise asks no recitation


def test_findings_for_a_model_with_no_rows_says_what_to_run_per_claim(tmp_path):
    done = run_cli("findings", "--model", "gemma3-270m", "--results-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = {line.split(":")[0]: line for line in done.stdout.splitlines()}
    assert set(lines) >= IDS
    # the retriever's recall needs no reader; every other claim names the command that fills it
    assert "reproduced" in lines.pop("litm-open-domain-recall")
    assert all(
        "not run: `longctx reproduce --scale claims --model gemma3-270m --chapters " in lines[c]
        for c in IDS - {"litm-open-domain-recall"}
    )


def test_the_cost_table_splits_what_is_left_by_where_it_can_run(tmp_path):
    """Rows made are measured; what is left is a CPU's when a block's estimate is under
    matrix.GPU_HOURS, else a GPU's; prompts longer than the window are counted apart, and
    with them the short block whose only claim also needs them."""

    def block(name, requests, stored, tokens, longest, hours=None, measured=0.0, claims=("c",)):
        out = {
            "block": name,
            "claims": list(claims),
            "requests": requests,
            "stored": stored,
            "prompt_tokens": tokens,
            "missing_prompt_tokens": tokens * (requests - stored) // requests,
            "max_prompt_tokens": longest,
            "max_new_tokens": 32,
            "window": 8192,
            "measured_seconds": {"cpu": measured, "gpu": 0.0},
        }
        if hours is not None:
            out["estimated_seconds"] = hours * 3600
        return out

    plan = {
        "model": "smollm2-135m-instruct",
        "backend": "hf",
        "created": "2026-11-26T00:00:00+0000",
        "blocks": [
            block("short", 100, 100, 100_000, 1_000, measured=7200.0),
            block("medium", 100, 0, 400_000, 4_000, hours=2.0),
            block("long", 100, 0, 800_000, 8_000, hours=matrix.GPU_HOURS + 1),
            block("too long", 50, 0, 500_000, 10_000, hours=1.0, claims=("d",)),
            block("too long's short partner", 20, 0, 2_000, 100, hours=0.1, claims=("d",)),
        ],
        "claims": {},
    }
    (tmp_path / "smollm2-135m-instruct").mkdir()
    (tmp_path / "smollm2-135m-instruct" / "claims-plan.json").write_text(json.dumps(plan))
    row = matrix.cost_table(tmp_path).iloc[0].to_dict()
    assert row["requests"] == 300 and row["prompt tokens"] == 1_300_000
    assert row["measured CPU hours"] == 2.0 and row["left for a CPU: estimated hours"] == 2.0
    assert row["left for a CPU: prompt tokens"] == 400_000
    gpu = next(k for k in row if k.startswith("left for a GPU"))
    assert row[gpu] == 800_000 and row["claims too long for the window: requests"] == 70
    assert row["stored"] == 100


def test_a_cell_wider_than_the_precision_target_is_marked_under_powered():
    """tag-spacy on the default reader: -8.0 [-20.7, +4.0] over 87 needles is ±12.7 on its
    wider side; a cell within ±10 carries no mark."""
    from longctx.claims import Estimate, judge, read_claims
    from longctx.findings import underpowered_words
    from longctx.matrix import Cell, Column, cell_markdown
    from longctx.reader import Reader

    claim = next(c for c in read_claims() if c.id == "tag-spacy")
    col = Column("f", "qwen2.5-coder-0.5b-instruct", "hf", Reader())
    wide = Estimate(-8.0, -20.7, 4.0, 87, 0.22, "", 64.4, 56.3, needed=125)
    narrow = Estimate(-8.0, -15.0, -1.0, 87, 0.02, "", 64.4, 56.3, needed=60)
    marked = cell_markdown(Cell(claim, col, "judged", wide, judge(wide, claim)))
    assert "† ±12.7" in marked and "under-powered" in marked
    assert "†" not in cell_markdown(Cell(claim, col, "judged", narrow, judge(narrow, claim)))
    words = underpowered_words(87, 125.0)
    assert "n = 87" in words and "about 125 units" in words
    assert "units would give" not in underpowered_words(87, float("nan"))


def test_the_recitation_premise_came_after_the_recitation_rows_and_the_matrix_says_so():
    """The length-alone premise (recitation with no filler, with the filler, and kept between
    the two) was rewritten after the default reader's recitation rows were made, so no filler
    claim of that reader may be marked pre-registered."""
    from datetime import datetime

    dates = matrix.rule_dates()
    assert dates is not None, "git history is needed to date the claims' rules"
    rows = ResultsStore(ROOT / "data" / "results", DEFAULT, "length_alone").rows()
    claims = [c for c in read_claims() if c.id in ("la-essay", "la-whitespace", "la-mask")]
    built = matrix.build(ROOT / "data" / "results", claims)
    for claim in claims:
        made = [
            datetime.strptime(r["created"], "%Y-%m-%dT%H:%M:%S%z")
            for r in rows
            if r["condition"]["mode"] == "recite"
        ]
        rule = dates.get(claim.id)
        after = rule is None or rule > min(made)  # None: the rule is not committed yet
        assert after and built.cell(claim.id, DEFAULT).preregistered is not True, claim.id


def test_a_recitation_that_names_the_right_document_identifies_it(tmp_path):
    """RULER's recite-then-answer premise is that the recitation finds a document holding the
    answer: the 1.5B names one in about half its QA1 recitations, mostly as a bare
    ``# Document <n>`` header with no text under it; a right number identifies the document,
    so the premise holds, and the rule, fixed after these rows, is not marked
    pre-registered."""
    reader = "qwen2.5-coder-1.5b-instruct"
    rows = _copy_store(reader, "ruler_qa", tmp_path, reader)
    recited = [
        r for r in rows if r["condition"]["mode"] == "recite" and r["condition"]["subtask"] == "qa1"
    ]
    headers_only = [r for r in recited if re.fullmatch(r"(#*\s*Document\s+\d+:?\s*)+", r["output"])]
    assert len(headers_only) > len(recited) / 2
    claims = [c for c in read_claims() if c.id == "la-ruler-qa1"]
    cell = matrix.build(tmp_path, claims).cell("la-ruler-qa1", reader)
    assert cell.judgement.premise_met
    assert "identified 51.8% >= 50%" in cell.judgement.premise
    assert cell.preregistered is not True


def _reader_rows(root: Path, folder: str, model: str) -> ResultsStore:
    store = ResultsStore(root, folder, "kv_retrieval")
    store.append(
        [
            stored_row(
                f"{folder}-{i}",
                model=model,
                fingerprint=Reader(model).ref.fingerprint,
                task="kv_retrieval",
                example_id=f"e{i}",
                output="",
            )
            for i in range(2)
        ]
    )
    return store


def test_one_damaged_store_skips_its_reader_with_a_warning_not_every_reader(tmp_path, monkeypatch):
    # One damaged store stopped `findings`, `export` and `pack` for every reader.
    good = _reader_rows(tmp_path, "smollm2-135m-instruct", "smollm2-135m-instruct")
    bad = _reader_rows(tmp_path, DEFAULT, DEFAULT)
    bad.pack()
    bad.packed_path.write_bytes(b"not xz")
    with pytest.warns(UserWarning, match=f"skipping the reader {DEFAULT}: .*damaged"):
        assert [c.folder for c in matrix.columns(tmp_path)] == [good.dir.parent.name]
    # a reader whose rows fail while its claims are computed is skipped the same way
    bad.packed_path.unlink()
    _reader_rows(tmp_path, DEFAULT, DEFAULT)
    real = matrix.estimates

    def failing(results_dir, claims, reader, **kw):
        if reader.model == DEFAULT:
            raise matrix.DataFileError("a damaged store")
        return {}

    monkeypatch.setattr(matrix, "estimates", failing)
    with pytest.warns(UserWarning, match=f"skipping the reader {DEFAULT}: a damaged store"):
        built = matrix.build(tmp_path)
    assert [c.folder for c in built.columns] == ["smollm2-135m-instruct"]
    monkeypatch.setattr(matrix, "estimates", real)


def test_an_arm_whose_prompts_are_its_controls_is_not_testable():
    """C-NORM on the 135M chose no delimiter: every treatment prompt was its control's, yet
    batch composition moved some answers and the interval excluded 0. Such a cell is never
    judged; one unit whose prompt differs makes it testable again."""
    from longctx.claims import by_unit, paired_estimate
    from longctx.matrix import NOT_TESTABLE, Column, _cell

    def row(unit, arm, prompt, correct):
        return {"example_id": unit, "condition": {"arm": arm}, "prompt": prompt, "ok": correct}

    units = [f"q{i}" for i in range(40)]
    same = [row(u, "base", f"prompt {u}", 1.0) for u in units] + [
        row(u, "treated", f"prompt {u}", float(i % 4 != 0)) for i, u in enumerate(units)
    ]

    def estimate(rows):
        return paired_estimate(
            *(by_unit(rows, {"arm": a}, lambda r: r["ok"]) for a in ("base", "treated"))
        )

    noop = estimate(same)
    assert noop.identical == noop.n == 40 and not noop.testable and noop.ci_high < 0
    claim = next(c for c in read_claims() if c.id == "cnorm-qa")
    col = Column("f", "smollm2-135m-instruct", "hf", Reader("smollm2-135m-instruct"))
    cell = _cell(claim, col, noop, 40, None, None, None, None, {})
    assert cell.status == NOT_TESTABLE and cell.judgement is None
    assert cell.note.startswith("not testable: the treatment's prompts are the control's")
    changed = [dict(r, prompt="delimited " + r["prompt"]) if r is same[-1] else r for r in same]
    one = estimate(changed)
    assert one.identical == 39 and one.testable
    assert _cell(claim, col, one, 40, None, None, None, None, {}).status == "judged"
    # rows that carry no prompt (a derived side) leave it unknown, and judged
    bare = [{k: v for k, v in r.items() if k != "prompt"} for r in same]
    assert estimate(bare).identical is None and estimate(bare).testable


def test_a_family_is_holm_adjusted_alike_in_the_matrix_and_its_chapter(committed_matrix):
    """The crossing chapter adjusts its six main effects together (Holm); the matrix judged
    them one by one, so two 1.5B cells read "reproduced" at Holm p 0.16-0.17. Now the claims
    file names the family, and the matrix, the chapter table and the rule use the same p."""
    from dataclasses import replace

    from longctx.chapters.crossing.numbers import main_effects
    from longctx.claims import judge
    from longctx.metrics import holm

    folder = "qwen2.5-coder-1.5b-instruct"
    claims = {c.id: c for c in read_claims()}
    cells = {
        cid: cell for (cid, f), cell in committed_matrix.cells.items()
        if f == folder and claims[cid].family == "crossing main effects"
    }  # fmt: skip
    ests = {cid: cell.estimate for cid, cell in cells.items()}
    assert len(ests) == 6 and {e.family_size for e in ests.values()} == {6}
    assert [e.p_family for e in ests.values()] == pytest.approx(holm([e.p for e in ests.values()]))
    table = main_effects(ests, scale("crossing", "claims"), claims)
    for row in table.itertuples():
        cell = cells[f"crossing-{row.factor}"]
        assert row.p_holm == pytest.approx(cell.estimate.p_family)
        assert row.verdict == cell.judgement.verdict
    for cid in ("crossing-distractors", "crossing-filler"):
        assert cells[cid].judgement.verdict == "inconclusive at this n"
        assert "Holm-adjusted over the 6 tests" in cells[cid].judgement.direction
        alone = replace(ests[cid], p_family=None, family_size=None)
        assert judge(alone, claims[cid]).verdict == "reproduced"


def test_shuffled_rows_change_no_byte_of_the_matrix_and_its_stability(tmp_path):
    """No global seed: every interval, p and stability share is seeded by the sorted unit ids,
    so the same rows stored in another order give the same CSV, byte for byte."""
    import random

    rows = ResultsStore(ROOT / "data" / "results", DEFAULT, "kv_retrieval").rows()
    shuffled = list(rows)
    random.Random(7).shuffle(shuffled)
    ResultsStore(tmp_path / "a", DEFAULT, "kv_retrieval").append(rows)
    ResultsStore(tmp_path / "b", DEFAULT, "kv_retrieval").append(shuffled)
    claims = [c for c in read_claims() if c.chapter == "kv_retrieval"]
    built = [matrix.build(tmp_path / side, claims) for side in ("a", "b")]
    csvs = [matrix.frame(m).drop(columns=["rule_fixed", "first_row"]).to_csv() for m in built]
    assert csvs[0] == csvs[1]
    stable = [matrix.frame(m)["stability"].tolist() for m in built]
    assert stable[0] == stable[1] and all(0 <= s <= 1 for s in stable[0])


def test_a_fragile_verdict_is_shown_with_its_share_and_not_counted_as_decided():
    claim = next(c for c in read_claims() if c.id == "litm-kv-middle")
    col = Column("f", DEFAULT, "hf", Reader())
    est = Estimate(-20.0, -30.0, -10.0, 165, 0.001, "", 80.0, 60.0, stability=0.74)
    cell = Cell(claim, col, "judged", est, judge(est, claim))
    assert cell.judgement.verdict == "reproduced"
    assert cell.fragile and not cell.decided and cell.state == "fragile (reproduced)"
    assert "≈ fragile: reproduced in 74%" in cell_markdown(cell)
    steady = Cell(claim, col, "judged", replace(est, stability=0.95), judge(est, claim))
    assert steady.decided and not steady.fragile and "holds 95%" in cell_markdown(steady)


def test_a_moved_verdict_says_what_it_was_in_the_cell_the_csv_and_the_terminal():
    import pandas as pd

    log = pd.DataFrame(
        [
            ("2026-11-20", "f", "litm-kv-middle", "", "reproduced", "first verdict"),
            ("2026-11-26", "f", "litm-kv-middle", "reproduced", "premise not met", "floor rule"),
            ("2026-11-27", "g", "litm-kv-middle", "", "reproduced", "first verdict"),
        ],
        columns=["date", "reader", "claim", "before", "after", "why"],
    )
    moves = matrix.last_moves(log)
    assert set(moves) == {("f", "litm-kv-middle")}  # a first verdict is no move
    after, move = moves["f", "litm-kv-middle"]
    assert after == "premise not met" and move.words() == "was: reproduced, moved 2026-11-26"
    claim = next(c for c in read_claims() if c.id == "litm-kv-middle")
    col = Column("f", DEFAULT, "hf", Reader())
    cell = Cell(claim, col, "not run", note="not run: `longctx reproduce`", moved=move)
    shown = cell_markdown(cell)
    assert "(was: reproduced, moved 2026-11-26)" in shown and 'title="floor rule"' in shown
    table = matrix.Matrix([claim], [col], {(claim.id, "f"): cell})
    row = matrix.frame(table).iloc[0]
    assert (row["was"], row["moved_on"], row["moved_why"]) == (
        "reproduced",
        "2026-11-26",
        "floor rule",
    )
    assert matrix.reader_lines(table)[1].endswith("(was: reproduced, moved 2026-11-26: floor rule)")


def test_a_models_backends_are_replications_decided_only_when_they_agree():
    claim = next(c for c in read_claims() if c.id == "sc-hard-hurts")
    hf = Column(DEFAULT, DEFAULT, "hf", Reader())
    llama = Column(f"{DEFAULT}--llamacpp", DEFAULT, "llamacpp", Reader())
    loss = Estimate(-15.0, -22.0, -8.0, 200, 0.0001, "", 60.0, 45.0, stability=0.99)
    flat = Estimate(-3.0, -9.0, 3.0, 200, 0.4, "", 60.0, 57.0, stability=0.95)
    m = matrix.Matrix([claim], [hf, llama])
    m.cells[claim.id, hf.folder] = Cell(claim, hf, "judged", loss, judge(loss, claim))
    m.cells[claim.id, llama.folder] = Cell(claim, llama, "judged", flat, judge(flat, claim))
    m.reuse[llama.folder, claim.experiment] = 0.4
    assert list(m.models) == [DEFAULT]
    mc = m.model_cell(claim.id, DEFAULT)
    assert mc.replicated and mc.backend_sensitive and not mc.decided
    assert mc.state == "backend-sensitive" and m.reproduced_by(claim.id) == (0, 1)
    text = matrix.model_cell_markdown(mc)
    assert "**-15.0 [-22.0, -8.0]**" in text and "llamacpp: -3.0 [-9.0, +3.0]" in text
    assert "backend-sensitive" in text and "prefix reused in 40% of its rows" in text
    table = matrix.replication_table(m).iloc[0]
    assert table["claims judged on two backends"] == 1 and table["same verdict"] == 0
    assert table["backend-sensitive"] == claim.id
    # the same verdict on both: decided, and reproduced once for the model
    m.cells[claim.id, llama.folder] = Cell(claim, llama, "judged", loss, judge(loss, claim))
    agreed = m.model_cell(claim.id, DEFAULT)
    assert agreed.decided and not agreed.backend_sensitive and m.reproduced_by(claim.id) == (1, 1)
    assert "backends agree" in matrix.model_cell_markdown(agreed)


def test_cross_reader_sentences_and_states_are_computed_from_the_matrix():
    claims = [c for c in read_claims() if c.id in ("sc-hard-hurts", "sc-far-minus-hard")]
    hurts, far = sorted(claims, key=lambda c: c.id != "sc-hard-hurts")
    other = "qwen2.5-coder-1.5b-instruct"
    hf = Column(other, other, "hf", Reader(other))
    llama = Column(f"{other}--llamacpp", other, "llamacpp", Reader(other))
    loss = Estimate(-15.0, -22.0, -8.0, 200, 0.0001, "", 60.0, 45.0, stability=0.99)
    cost = {"hard_cost": 13.5}  # the hard negatives' cost, the premise the chapter computes
    gain = Estimate(7.0, 1.5, 12.5, 200, 0.01, "", 40.0, 47.0, cost, stability=0.63)
    flat = Estimate(5.5, -0.5, 11.0, 200, 0.08, "", 40.0, 45.5, cost, stability=0.6)
    m = matrix.Matrix([hurts, far], [hf, llama])
    for col, for_far in ((hf, flat), (llama, gain)):
        m.cells[hurts.id, col.folder] = Cell(hurts, col, "judged", loss, judge(loss, hurts))
        m.cells[far.id, col.folder] = Cell(far, col, "judged", for_far, judge(for_far, far))
    words = matrix.readers_words("semantic_competition", m)
    assert words.startswith(f"For {other} (hf and llamacpp), 1 of 2 judged claims is decided:")
    assert "(reproduced)" in words and "the other 1: 1 backend-sensitive" in words
    assert matrix.state_words(m.model_cell(far.id, other)) == (
        "inconclusive at this n on hf, llamacpp reproduced: backend-sensitive"
    )
    m.cells[far.id, hf.folder] = Cell(far, hf, "judged", gain, judge(gain, far))
    assert matrix.state_words(m.model_cell(far.id, other)) == (
        "reproduced, but fragile: it holds in 63% of 1,000 resamples of its units"
    )
    # the default model is the page's own reader: the sentence is about the others only
    assert matrix.readers_words("kv_retrieval", m).startswith("No other model")


def test_findings_for_a_model_reads_every_backend_it_has_rows_on(tmp_path):
    _reader_rows(tmp_path, DEFAULT, DEFAULT)
    llama = ResultsStore(tmp_path, f"{DEFAULT}--llamacpp", "kv_retrieval")
    llama.append(
        [
            {**r, "backend": "llamacpp"}
            for r in _reader_rows(tmp_path / "x", DEFAULT, DEFAULT).rows()
        ]
    )
    assert matrix.model_backends(tmp_path, DEFAULT) == ["hf", "llamacpp"]
    assert matrix.model_backends(tmp_path, "smollm2-135m-instruct") == []


def test_a_cells_link_names_exactly_its_rows():
    """The U-shape's edge side averages two conditions: the filter names both beside the
    middle, and the paired questions ride along; units that are not example ids (needles,
    formats) are left to the conditions."""
    from longctx.claims import UnitScores, by_unit, paired_estimate, rows_filter, rows_fragment

    def row(q, idx, right):
        condition = {"setting": "documents", "gold_index": idx}
        return {"example_id": q, "condition": condition, "output": "a" if right else "b"}

    rows = [row(q, i, i != 9) for q in ("q1", "q2") for i in (0, 9, 19)] + [row("q3", 0, True)]
    score = lambda r: float(r["output"] == "a")  # noqa: E731
    first, middle, last = (by_unit(rows, {"gold_index": i}, score) for i in (0, 9, 19))
    edge = UnitScores({u: (first[u] + last[u]) / 2 for u in set(first) & set(last)})
    edge.where, edge.by_example = (first.where, last.where), True
    est = paired_estimate(edge, middle)
    assert rows_filter(est) == "gold_index: 0 || gold_index: 19 || gold_index: 9"
    assert rows_fragment(est) == (
        "condition=gold_index%3A%200%20%7C%7C%20gold_index%3A%2019%20%7C%7C%20gold_index%3A%209"
        "&units=q1+q2"
    )
    by_needle = by_unit(rows, {"gold_index": 0}, score, unit=lambda r: r["example_id"][-1])
    assert not paired_estimate(by_needle, by_needle).units_are_examples


def test_a_served_models_rows_name_their_reader_without_reaching_a_server(tmp_path):
    from longctx.tables import stored_readers

    served = Reader.of(DEFAULT, "openai", "http://rows-only.invalid/v1", served_model="served")
    folder = served.results_folder(tmp_path)
    _copy_store(DEFAULT, "kv_retrieval", tmp_path, folder, backend="openai:served")
    (reader,) = stored_readers(tmp_path, "kv_retrieval")
    assert reader.results_folder(tmp_path) == folder
    assert [c.folder for c in matrix.columns(tmp_path)] == [folder]
