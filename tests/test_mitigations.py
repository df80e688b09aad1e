"""The fixes for a lost middle on hand-made cases: attention sorting, Found in the Middle's
calibration, the shuffle control, the attention instruction, and every arm through the
runner at the ci scale on the smoke model."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from longctx import plots
from longctx import transforms as T
from longctx.attention import calibrated_relevance
from longctx.chapters import contract, run_of
from longctx.chapters.mitigations import design, numbers, sections
from longctx.errors import ParameterError
from longctx.reader import Reader
from longctx.runner import block_keys, run, stored
from longctx.tasks import multidoc_qa as qa
from rows import answered_row

ROOT = Path(__file__).resolve().parents[1]
SCALES = json.loads((ROOT / "lib/longctx/scales/mitigations.json").read_text())


def params(**overrides) -> dict:
    return {
        **SCALES["book"],
        "arms": SCALES["all_arms"]["arms"],  # every arm the design has
        **{k: v for k, v in SCALES["ci"].items() if k != "extends"},
        **overrides,
    }


def example(n: int = 5, gold: int = 2) -> T.Example:
    items = tuple(T.Item(f"text {i}", f"title {i}", i == gold) for i in range(n))
    return T.Example(qa.TASK, "q1", "who?", ("a",), items, fields={"source": "oracle+bm25"})


def test_attention_sorting_puts_the_most_attended_last_and_keeps_the_documents():
    mass = [0.10, 0.40, 0.05, 0.30, 0.15]
    order = design.sorted_by_attention(mass)
    assert order == [2, 0, 4, 3, 1]
    ex = example(gold=1)
    out = design.arranged(ex, order, "attention, 1 pass")
    assert [it.title for it in out.items] == [f"title {i}" for i in order]
    assert sorted(out.items, key=lambda it: it.title) == sorted(ex.items, key=lambda it: it.title)
    assert out.gold_index == 4 and out.settings["arranged_from"] == 1


def test_calibration_removes_a_planted_positional_bias_and_finds_the_relevant_document():
    bias = [0.30, 0.05, 0.04, 0.06, 0.25]  # a U: the edges draw attention whatever they hold
    relevant = 2
    mass = [b + (0.08 if i == relevant else 0.0) for i, b in enumerate(bias)]
    assert max(range(5), key=mass.__getitem__) == 0  # raw attention ranks the first document
    calibration = [{"document_mass": [b + d for b in bias]} for d in (-0.01, 0.0, 0.01)]
    measured = design.positional_bias(calibration)
    assert measured == pytest.approx(bias)
    relevance = calibrated_relevance(mass, measured)
    assert design.sorted_by_attention(relevance)[-1] == relevant


def test_a_document_with_line_breaks_of_its_own_is_one_span_of_attention():
    from longctx.attention import char_spans

    docs = [qa.Document("one", "first"), qa.Document("two", "a\n\nb"), qa.Document("3", "c")]
    prompt = qa.build_prompt("who?", docs)
    lines = qa.document_lines(docs)
    assert len(lines) == 3 and qa.format_documents(docs) == "\n".join(lines)
    spans = char_spans(prompt, lines)
    assert prompt[slice(*spans[1])] == "Document [2](Title: two) a\n\nb"
    assert all(end > start for start, end in spans)  # the blank line is no document


def test_the_shuffle_control_is_seeded_per_question_and_reproducible():
    ex = example(n=20, gold=9)
    once, again = T.Arrange("shuffle", seed=0)(ex), T.Arrange("shuffle", seed=0)(ex)
    assert once.items == again.items and once.items != ex.items
    other = T.Arrange("shuffle", seed=0)(replace(ex, example_id="q2"))
    assert [it.title for it in other.items] != [it.title for it in once.items]
    assert once.settings["arranged_from"] == 9


def test_the_instruction_is_a_prompt_file_written_before_the_documents():
    out = T.Instruction(design.INSTRUCTION_PROMPT)(example())
    assert out.settings["instruction"] == design.INSTRUCTION_PROMPT
    assert "including those in the middle" in out.slots["before_context"][0]
    with pytest.raises(ParameterError, match="unknown prompt template"):
        T.Instruction("no_such_prompt")(example())


def test_recite_then_answer_copies_first_and_answers_from_the_copy_alone():
    from longctx.chapters.mitigations.numbers import arm_of

    ex = example()
    first = design.recitation(ex)
    assert first.prompt.startswith("Read the question based on the given documents.")
    assert "Document [3](Title: title 2) text 2" in first.prompt and first.prompt.endswith("who?")
    assert not first.stop.newline and first.condition["step"] == "recitation"
    row = {
        "example_id": first.example_id,
        "gold": list(first.gold),
        "condition": first.condition,
        "meta": first.meta,
        "output": "# Document 3\n(Title: title 2) text 2\n# Document 5\nnothing",
    }
    (second,) = design.answer_from_recitation([row])
    assert "Document [1] (Title: title 2) text 2\nDocument [2] nothing" in second.prompt
    assert "text 0" not in second.prompt and second.prompt.endswith("Question: who?\nAnswer:")
    assert second.condition["step"] == "answer" and second.gold == ("a",)
    # no headers: the whole recitation is the one search result
    (bare,) = design.answer_from_recitation([{**row, "output": "text 2"}])
    assert "Document [1] text 2" in bare.prompt
    # only the answer is scored as the arm's
    assert arm_of(row) is None and arm_of({**row, "condition": second.condition}) == "recite"


def test_the_recitations_say_which_step_lost_the_answer():
    def step(name: str, question: str, idx: int, output: str) -> dict:
        condition = {"mitigation": "recite", "num_documents": 20, "gold_index": idx, "step": name}
        return {"example_id": question, "condition": condition, "output": output, "gold": ["Paris"]}

    rows = [
        step("recitation", "q1", 0, "# Document 1\nThe capital is Paris."),  # held, answered right
        step("answer", "q1", 0, "Paris"),
        step("recitation", "q2", 0, "# Document 4\nThe capital is paris!"),  # held, answered wrong
        step("answer", "q2", 0, "Rome"),
        step("recitation", "q1", 9, "Document 1: a title"),  # missed, right by luck
        step("answer", "q1", 9, "Paris"),
        step("recitation", "q2", 9, "# Document 2\nRome"),  # missed, no answer stored yet
    ]
    frame = numbers.recitations([*rows, _baseline_row(0, "Paris")], 20).set_index("position")
    assert list(frame.index) == [1, 10]  # no recitation with the gold last
    assert frame.loc[1, ["recited", "held", "held_answered", "held_right"]].tolist() == [2, 2, 2, 1]
    assert frame.loc[10, ["recited", "held", "missed_answered", "missed_right"]].tolist() == [
        2,
        0,
        1,
        1,
    ]
    said = numbers.recitation_sentence(frame.reset_index(), "tiny", 20)
    assert said == (
        "For tiny, the recitation held a gold answer for 2 of 2 questions with the gold first "
        "and 0 of 2 in the middle; from a copy that held one it answered 50% right (n = 2); from a "
        "copy that did not it answered 100% right (n = 1)."
    )
    assert (
        numbers.recitation_sentence(numbers.recitations([], 20), "tiny", 20)
        == "tiny has no recitations in this run."
    )


def _baseline_row(idx: int, answer: str, question: str = "q1", **condition) -> dict:
    condition = {"setting": "documents", "num_documents": 20, "gold_index": idx, **condition}
    return {"example_id": question, "condition": condition, "output": answer, "gold": ["Paris"]}


def test_the_best_edge_comes_from_the_readers_own_baseline():
    row = _baseline_row
    rows = [row(0, "Paris"), row(0, "Paris", "q2"), row(19, "Paris"), row(19, "Rome", "q2")]
    assert numbers.best_edge(rows, 20) == "first"
    assert numbers.best_edge([row(0, "Rome"), row(19, "Paris")], 20) == "last"
    assert numbers.best_edge([row(0, "Paris"), row(19, "Paris")], 20) == "last"  # a tie
    with pytest.raises(ParameterError, match="no baseline rows"):
        numbers.best_edge([row(0, "Paris")], 20)


def test_accuracy_by_position_counts_each_question_once_per_arm():
    row = _baseline_row
    rows = [row(9, "Paris"), row(9, "Rome", "q2"), row(9, "Paris", mitigation="shuffle")]
    rows += [row(9, "Paris", "q2", mitigation="shuffle"), row(0, "Paris")]
    table = numbers.position_accuracy(rows, 20).set_index(["arm", "position"])
    assert table.loc[("baseline", 10), "n"] == 2
    assert table.loc[("baseline", 10), "accuracy"] == 0.5
    assert table.loc[("random shuffle", 10), "accuracy"] == 1.0
    assert table.loc[("baseline", 1), "n"] == 1
    low, high = table.loc[("random shuffle", 10), ["ci_low", "ci_high"]]
    assert low < 1.0 == high  # Wilson, not a zero-width interval


def test_bad_parameters_are_one_line_errors():
    with pytest.raises(ParameterError, match="unknown arms"):
        design.check(params(arms=["shuffle", "prayer"]))
    with pytest.raises(ParameterError, match="ms_poe_ratios"):
        design.check(params(ms_poe_ratios=[1.8, 1.2]))


def test_the_baseline_is_the_multidoc_chapters_own_prompts():
    from longctx.chapters.multidoc_qa import design as multidoc

    p = params(num_questions=2, num_documents=20)
    ours = design.blocks(p)[0].requests
    multidoc_params = {**p, "num_documents": [20], "random_order": False, "source": "oracle"}
    examples = multidoc.examples_for(multidoc_params, 20, *multidoc.questions_for(p))
    theirs = qa.make_requests(examples, 20, design.DEPTHS)
    assert [(r.prompt, r.condition) for r in ours] == [(r.prompt, r.condition) for r in theirs]


def test_every_arm_runs_through_the_runner_and_resumes(tmp_path):
    reader = Reader("smollm2-135m-instruct", "hf", device="cpu", dtype="float32")
    p = params()
    design.check(p)
    first = design.blocks(p)
    run(first, reader, tmp_path, batch_size=4, progress=False, log=lambda m: None)
    edge = numbers.best_edge(stored(first[:1], reader, tmp_path), p["num_documents"])
    plan = design.blocks(p, edge)
    run(plan, reader, tmp_path, batch_size=4, progress=False, log=lambda m: None)
    rows = stored(plan, reader, tmp_path)
    arms = {}
    for r in (r for r in rows if r.get("task") == qa.TASK):  # not the attention rows
        arms.setdefault(r["condition"].get("mitigation", "baseline"), []).append(r)
    questions = 2 * len(design.DEPTHS)
    assert {a: len(rs) for a, rs in arms.items()} == {
        "baseline": 2 * questions,  # with the query-aware arm, in the multi-document store
        "shuffle": questions,
        "reorder": 2,
        "instruction": questions,
        "ms_poe": questions,
        "fitm": questions,
        "sort_1": questions,
        "sort_3": questions,
        "recite": 2 * questions,  # a recitation and an answer from it
    }
    labels = {r["condition"]["arrangement"] for r in arms["sort_3"]}
    assert labels == {"ascending by attention, 3 passes"}
    assert {r["condition"]["arrangement"] for r in arms["fitm"]} == {
        f"ascending by calibrated attention, best {edge}"
    }
    assert {r["condition"]["positions"] for r in arms["ms_poe"]} == {"ms-poe 1.2-1.8 per key head"}
    again = run(plan, reader, tmp_path, batch_size=4, progress=False, log=lambda m: None)
    assert again.missing == 0 and sum(b["generated"] for b in again.blocks) == 0


def test_the_chapters_claims_are_pre_registered_before_its_rows():
    """Every claim the design serves has its rule in the pre-registration file or, once the
    default reader's rows of its arm are committed, in the claims file (never both, the same
    columns and rules); the claims file holds exactly the claims of the book's arms, and git
    dates each rule (so rows made after it count as pre-registered)."""
    from longctx import matrix
    from longctx.chapters import contract
    from longctx.claims import CLAIMS_FILE, PREREGISTERED_FILE, read_claims

    pending = {c.id: c for c in read_claims(ROOT / PREREGISTERED_FILE) if c.id.startswith("mit-")}
    judged = {c.id: c for c in read_claims(ROOT / CLAIMS_FILE) if c.chapter == "mitigations"}
    assert not set(pending) & set(judged)
    assert set(pending) | set(judged) == set(design.CLAIM_BLOCKS)
    assert set(judged) == set(design.claim_blocks(SCALES["book"]["arms"]))
    assert set(judged) == set(contract("mitigations").claim_blocks)
    ours = {**pending, **judged}
    assert all(c.premise and c.floor == "closed-book" for c in ours.values())
    dates = matrix.rule_dates()
    assert dates is not None, "git history is needed to date the claims' rules"
    assert set(ours) <= set(dates)


def test_a_rule_in_both_files_is_the_claims_files():
    from longctx import matrix

    head = "id,kind,margin,premise,direction,paper_effect\n"
    files = {
        "claims.csv": head + "a,directional,,room >= 10,1,6\n",
        "preregistered.csv": head + "a,no-effect,10,,0,\nb,directional,,,1,\n",
    }
    rules = matrix._rules_in(files.__getitem__, ["claims.csv", "preregistered.csv"])
    assert rules == {
        "a": ("directional", "", "room >= 10", "1", "6"),
        "b": ("directional", "", "", "1", ""),
    }


def _hand_row(q, arm, gold, right, arranged_from=None):
    """A scored row by hand: question ``q`` answered by ``arm`` with the gold at ``gold`` of 5
    documents (``arranged_from`` where it stood in the baseline prompt)."""
    c = {"setting": "documents", "num_documents": 5, "gold_index": gold, "query_aware": False}
    if arm != "baseline":
        c["mitigation"] = arm
    if arranged_from is not None:
        c["arranged_from"] = arranged_from
    answer = "Paris" if right else "Rome"
    return {"condition": c, "example_id": q, "output": answer, "gold": ["Paris"]}


def test_each_fix_is_judged_in_the_middle_against_the_baseline_and_the_shuffle():
    """Four questions, 5 documents (first 0, middle 2, last 4), by hand: the baseline answers
    the edges and misses the middle; the sort answers all but one middle question; the shuffle
    answers half; reorder's one prompt per question serves every position."""
    row = _hand_row
    qs = ["q1", "q2", "q3", "q4"]
    rows = [row(q, "baseline", i, i != 2) for q in qs for i in (0, 2, 4)]
    rows += [row(q, "sort_1", 4, not (q == "q4" and i == 2), i) for q in qs for i in (0, 2, 4)]
    rows += [row(q, "shuffle", 1, q in ("q1", "q2"), i) for q in qs for i in (0, 2, 4)]
    rows += [row(q, "reorder", 0, q != "q1", 2) for q in qs]
    rows.append(row("q1", "baseline", 2, True) | {"condition": {"setting": "closed-book"}})
    est = numbers.claims(rows, {"num_documents": 5})
    assert est["mit-sort-1"].difference == pytest.approx(75.0) and est["mit-sort-1"].n == 4
    assert est["mit-sort-1"].facts["edge_change"] == pytest.approx(0.0)
    assert est["mit-sort-1-vs-shuffle"].difference == pytest.approx(25.0)
    assert est["mit-reorder"].difference == pytest.approx(75.0)
    assert est["mit-reorder"].facts["edge_change"] == pytest.approx(-25.0)
    assert "mit-fitm" not in est  # no rows yet: not estimable, left to the findings page


def test_the_strongest_fixes_are_ranked_by_their_middle_gain_and_never_a_control():
    """Four questions, the baseline misses the middle: the shuffle (+50) and the reorder (+75)
    are controls; sort_1 gains 75, and Ms-PoE and the instruction 25 each, a tie the arms'
    order breaks."""
    qs = ["q1", "q2", "q3", "q4"]
    rows = [_hand_row(q, "baseline", i, i != 2) for q in qs for i in (0, 2, 4)]
    rows += [_hand_row(q, "shuffle", 1, q in ("q1", "q2"), 2) for q in qs]
    rows += [_hand_row(q, "reorder", 0, q != "q1", 2) for q in qs]
    rows += [_hand_row(q, "sort_1", 4, q != "q4", 2) for q in qs]
    rows += [_hand_row(q, arm, 2, q == "q1") for q in qs for arm in ("instruction", "ms_poe")]
    assert numbers.strongest_fixes(rows, 5) == ["sort_1", "ms_poe"]
    assert numbers.strongest_fixes(rows, 5, count=3) == ["sort_1", "ms_poe", "instruction"]
    with pytest.raises(ParameterError, match="no baseline rows"):
        numbers.strongest_fixes([r for r in rows if "mitigation" in r["condition"]], 5)


def _two_readers_rows():
    """Twelve questions, 5 documents, the gold in the middle (index 2): reader A's baseline
    misses all, the shuffle answers 3, the instruction answers all twelve; reader B's
    instruction answers none of the 6 its shuffle answers."""
    qs = [f"q{i:02d}" for i in range(12)]
    a = [_hand_row(q, "baseline", 2, False) for q in qs]
    a += [_hand_row(q, "shuffle", 1, q in qs[:3], 2) for q in qs]
    a += [_hand_row(q, "instruction", 2, True) for q in qs]
    b = [_hand_row(q, "baseline", 2, q in qs[:6]) for q in qs]
    b += [_hand_row(q, "shuffle", 1, q in qs[:6], 2) for q in qs]
    b += [_hand_row(q, "instruction", 2, False) for q in qs]
    return a, b


def test_the_gains_across_readers_name_who_beat_the_shuffle_by_interval_and_adjusted_test():
    a, b = _two_readers_rows()
    by_reader = {
        "A": numbers.claims(a, {"num_documents": 5}),
        "B": numbers.claims(b, {"num_documents": 5}),
    }
    table = numbers.gains(by_reader)
    assert list(table["reader"]) == ["A", "B"] and set(table["arm"]) == {"instruction"}
    first = table.iloc[0]
    assert first["baseline_difference"] == pytest.approx(100.0) and first["baseline_n"] == 12
    assert first["shuffle_difference"] == pytest.approx(75.0) and first["shuffle_sign"] == 1
    assert table.iloc[1]["shuffle_sign"] == -1  # -50 points on 6 of 12: the exact test agrees
    assert numbers.against_shuffle(table) == (
        "For A, attention instruction beat the random shuffle. "
        "For B, attention instruction fell below the random shuffle."
    )
    assert "No reader" in numbers.against_shuffle(numbers.gains({}))


def test_an_attention_row_is_no_arms_answer():
    assert numbers.arm_of({"document_mass": [0.5, 0.5], "example_id": "q1"}) is None


def test_the_cost_is_judged_against_the_bar_never_asserted():
    timing = {"model": "m", "backend": "hf", "threads": 2, "dtype": "bfloat16", "prompts": 8}
    timing |= {"baseline_s": 60.0, "arms": {"sort_1": {"ratio": 1.5}, "sort_3": {"ratio": 3.0}}}
    said = numbers.cost_sentence(timing, 3)
    assert "attention sorting, 1 pass took 1.50x (within the bar)" in said
    assert "attention sorting, 3 passes took 3.00x (beyond the bar)" in said
    assert f"bar at {numbers.COST_BAR}x" in said
    # beyond the bar, why: a read is 0.50 of an answer, three of them and the answer 2.50x
    assert "costs about 0.50 of an answer" in said and "come to about 2.50x" in said
    assert "under 0.50 of an answer" in said
    within = timing | {"arms": {"sort_1": {"ratio": 1.2}, "sort_3": {"ratio": 1.9}}}
    assert "A read" not in numbers.cost_sentence(within, 3)  # nothing to explain
    assert "not been timed" in numbers.cost_sentence(None, 3)


def _store_answers(reader: Reader, p: dict, results: Path, right) -> None:
    """Every prompt of ``reader``'s plan answered without a model, ``right(request)`` saying
    which answers name the gold: the baseline first, since the reorder arm's edge is read
    from it."""

    def answer(plan) -> None:
        for block in plan:
            store = reader.store(results, block.experiment)
            have = store.keys() if store.holds_rows() else set()
            store.append(
                answered_row(key, r, reader=reader, output=r.gold[0] if right(r) else "no idea")
                for key, r in zip(block_keys(block, reader), block.requests, strict=True)
                if key not in have
            )

    baseline = design.blocks(p)[:1]
    answer(baseline)
    answer(
        design.blocks(p, numbers.best_edge(stored(baseline, reader, results), p["num_documents"]))
    )


def test_the_page_sets_each_stored_readers_rows_beside_the_runs_own(tmp_path):
    arms = ["shuffle", "reorder", "instruction", "query_aware"]
    chapter = contract("mitigations")
    me, other = Reader("smollm2-135m-instruct"), Reader()
    p = {**params(arms=arms), "arms": arms}
    _store_answers(me, p, tmp_path, lambda r: True)
    _store_answers(other, p, tmp_path, lambda r: r.condition.get("mitigation") == "instruction")
    run = run_of("mitigations", me, "ci", tmp_path, arms=arms)
    view = chapter.analyze(run)
    by_reader = view.accuracy.groupby("model")["accuracy"]
    assert by_reader.min().to_dict() == {me.label: 1.0, other.label: 0.0}
    assert by_reader.max().to_dict() == {me.label: 1.0, other.label: 1.0}  # its instruction
    mine, theirs = (view.gains[view.gains["reader"] == r.label] for r in (me, other))
    assert set(mine["arm"]) == set(theirs["arm"]) == {"reorder", "instruction", "query_aware"}
    instruction = theirs.set_index("arm").loc["instruction"]
    assert instruction["baseline_difference"] == pytest.approx(100.0)
    assert view.quoted["mit-readers"] == 2 and view.label == me.label
    assert set(view.estimates) == set(chapter.claims(run))  # the run's own reader's only


def test_no_two_arms_on_the_figure_differ_by_colour_alone():
    colours, styles = sections.palette(["baseline", *SCALES["all_arms"]["arms"]])
    looks = {arm: (colours[arm], styles.get(arm, {}).get("ls", "-")) for arm in colours}
    fixes = [numbers.ARM_NAMES[a] for a in SCALES["all_arms"]["arms"] if a not in numbers.CONTROLS]
    shapes = {styles[f]["marker"] for f in fixes}
    assert len(shapes) == len(fixes)  # a shape per fix
    assert plots.PAPER_STYLE["marker"] not in shapes  # none taken for the paper's marks
    assert len(set(looks.values())) == len(looks)  # and a colour or a dash per arm


def test_a_plan_built_from_a_readers_rows_is_that_readers_own(tmp_path, monkeypatch):
    # Found in the Middle's edge comes from each reader's baseline: two readers of one
    # process with the same parameters must not share one plan
    p = params(arms=["fitm"])
    first, last = Reader("smollm2-135m-instruct"), Reader()
    edge_of = {first: 0, last: p["num_documents"] - 1}
    for reader, gold in edge_of.items():
        baseline = design.blocks(p)[:1]
        store = reader.store(tmp_path, baseline[0].experiment)
        store.append(
            answered_row(
                key,
                r,
                reader=reader,
                output=r.gold[0] if r.condition["gold_index"] == gold else "no",
            )
            for key, r in zip(block_keys(baseline[0], reader), baseline[0].requests, strict=True)
        )
    edges = []
    real = design.blocks
    monkeypatch.setattr(design, "blocks", lambda q, edge=None: edges.append(edge) or real(q, edge))
    for reader in edge_of:
        run_of("mitigations", reader, "ci", tmp_path, dry_run=True, arms=["fitm"]).planned()
    assert [e for e in edges if e] == ["first", "last"], edges
