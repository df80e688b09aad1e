"""Length-alone task: problem splits, prompts, stop rules, scoring, recitation, retrieve-then-solve."""

import gzip
import json

import pandas as pd
import pytest

from longctx.chapters.length_alone import analysis as length_alone_analysis
from longctx.errors import DataFileError, ParameterError
from longctx.padding import filler_slot, masked_gap
from longctx.tasks import length_alone as la


def test_varsum_is_seeded_and_its_answer_is_the_sum():
    a, b = la.varsum_problems(3, seed=1), la.varsum_problems(3, seed=1)
    assert a == b and a != la.varsum_problems(3, seed=2)
    p = a[0]
    values = dict(line.split(" = ") for line in p.evidence.splitlines())
    assert len(values) == 50
    names = p.question.split("What is ")[1].split("?")[0].split(" + ")
    assert len(names) == 3 and str(sum(int(values[n]) for n in names)) == p.answer


def test_gsm8k_split_hand_worked():
    p = la.split_gsm8k(
        "Tom has 3 apples. He buys 2 more. How many apples does he have?",
        "He has 3+2=<<3+2=5>>5 apples.\n#### 5",
        "g-1",
    )
    assert p.evidence == "Tom has 3 apples. He buys 2 more."
    assert p.question.startswith("How many apples does he have?")
    assert p.analysis == "He has 3+2=5 apples." and p.answer == "5"
    assert la.split_gsm8k("How many?", "x\n#### 1", "g-2") is None
    with pytest.raises(DataFileError, match="####"):
        la.split_gsm8k("A. B?", "no answer line", "g-3")


def test_gsm8k_reads_the_mirror(public_data):
    problems = la.gsm8k_problems(5, seed=0)
    assert len(problems) == 5 and all(
        p.answer.lstrip("-").replace(".", "").isdigit() for p in problems
    )


def test_mmlu_readers_package_and_hub_formats(tmp_path):
    path = tmp_path / "mmlu.jsonl"
    rows = [
        {
            "question": "2+2?",
            "answer_a": "3",
            "answer_b": "4",
            "answer_c": "5",
            "answer_d": "6",
            "correct_answer": "B",
            "topic": "math",
        },
        {
            "question": "question",
            "answer_a": "answer_a",
            "answer_b": "answer_b",
            "answer_c": "answer_c",
            "answer_d": "answer_d",
            "correct_answer": "answer",
            "topic": "x",
        },
        {
            "question": "Capital of France?",
            "choices": ["Rome", "Paris", "Oslo", "Bern"],
            "answer": 1,
            "subject": "geo",
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    problems = la.read_mmlu_jsonl(path)
    assert [p.answer for p in problems] == ["2", "2"]  # the header row is skipped
    assert problems[0].question.endswith("1. 3\n2. 4\n3. 5\n4. 6")
    path.write_text(json.dumps({"question": "q", "choices": ["a", "b"], "answer": 0}))
    with pytest.raises(DataFileError, match="4 options"):
        la.read_mmlu_jsonl(path)


def _humaneval_fixture(tmp_path):
    path = tmp_path / "he.jsonl.gz"
    row = {
        "task_id": "T/0",
        "prompt": 'def add(a, b):\n    """Add."""\n',
        "entry_point": "add",
        "canonical_solution": "    return a + b\n",
        "test": "def check(c):\n    assert c(1, 2) == 3\n",
    }
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(row) + "\n")
    (p,) = la.read_humaneval(path)
    return p


def test_humaneval_reader_on_a_fixture(tmp_path):
    p = _humaneval_fixture(tmp_path)
    assert p.answer == "T/0" and "`add`" in p.question and p.evidence.startswith("def add")


def test_prompts_place_filler_between_or_before_and_length_zero_is_the_short_problem():
    p = la.varsum_problems(1)[0]
    short = la.build_prompt(p)
    assert "# Others" not in short and short.endswith("Let's think step by step.")
    between = la.build_prompt(p, filler=filler_slot("essay", 100), filler_kind="essay")
    assert between.index(p.evidence) < between.index("# Others") < between.index(p.question)
    before = la.build_prompt(
        p, filler=filler_slot("whitespace", 100), filler_kind="whitespace", placement="before"
    )
    assert before.startswith("# Others\n") and before.index(p.evidence) < before.index(p.question)
    masked = la.build_prompt(p, filler=masked_gap(100), filler_kind="mask")
    assert masked.replace(masked_gap(100), "") == short  # visible tokens identical to length 0
    with pytest.raises(ParameterError):
        la.build_prompt(p, placement="middle")


def test_make_requests_shares_length_zero_and_carries_conditions():
    problems = la.varsum_problems(2)
    reqs = la.make_requests(problems, filler_kinds=["essay", "mask"], lengths=[0, 50])
    assert len(reqs) == 2 * 3  # length 0 once, then essay and mask at 50
    conds = {(r.condition["filler"], r.condition["filler_tokens"]) for r in reqs}
    assert conds == {("none", 0), ("essay", 50), ("mask", 50)}
    recite = la.make_requests(problems, filler_kinds=["essay"], lengths=[50], mode="recite")
    assert all(r.prompt.endswith("## Problem Description") for r in recite)


@pytest.mark.parametrize(
    "text,want",
    [
        ("x = 3 + 4 = 7. The answer is 7.", "7"),
        ("The answer is: $1,234.", "1234"),
        ("so 12 then 15", "15"),
        ("The answer is 18.0", "18"),
        ("no number", None),
    ],
)
def test_final_number(text, want):
    assert la.final_number(text) == want


def test_stop_rules_fire_only_once_the_answer_is_complete():
    rule = la.stop_rule("gsm8k", "solve")
    assert not rule.cut("The answer is 12")[1]  # could still be 123
    assert rule.cut("The answer is 123.\n")[1]
    assert la.stop_rule("mmlu", "solve").cut(" 2")[1]
    code = la.stop_rule("humaneval", "solve")
    assert not code.cut("```python\ndef f():\n    return 1\n")[1]
    assert code.cut("```python\ndef f():\n    return 1\n```")[1]
    assert la.stop_rule("varsum", "recite").cut("x_1 = 3\n## Question\nWhat?\n## Answer")[1]


def test_scoring_numbers_and_options():
    p = la.varsum_problems(1)[0]
    assert la.score_output(p, f"... The answer is {p.answer}.")["correct"] == 1.0
    assert la.score_output(p, "The answer is 0.")["correct"] == 0.0
    m = la.Problem("mmlu", "m", "q", "opts", "3")
    assert la.score_output(m, "3. Not wrong")["correct"] == 1.0
    assert la.score_output(m, "Option 2")["correct"] == 0.0


def test_humaneval_scoring_runs_sandboxed(tmp_path):
    p = _humaneval_fixture(tmp_path)
    assert la.score_output(p, "```python\ndef add(a, b):\n    return a + b\n```")["correct"] == 1.0
    # A body continuing the prompt
    assert la.score_output(p, "    return a + b\n")["correct"] == 1.0
    assert la.score_output(p, "```python\ndef add(a, b):\n    return a - b\n```")["correct"] == 0.0
    loop = la.score_output(
        p, "```python\ndef add(a, b):\n    while True:\n        pass\n```", timeout_s=1.0
    )
    assert loop == {"correct": 0.0, "parsed": "timeout"}


def test_every_humaneval_reference_solution_passes_and_an_empty_body_fails():
    """The tests run apart from the code (check_solution): HumanEval's own solutions must all
    still pass, and its prompts completed with ``return None`` must all fail."""
    from concurrent.futures import ThreadPoolExecutor

    from longctx.data import package_file

    with gzip.open(package_file(*la.HUMANEVAL_PACKAGE), "rt") as f:
        rows = {r["task_id"]: r for r in map(json.loads, f)}
    problems = la.humaneval_problems()
    assert len(problems) == len(rows) == 164

    def judged(problem):
        row = rows[problem.id]
        right = la.score_output(
            problem, f"```python\n{row['prompt']}{row['canonical_solution']}```"
        )
        empty = la.score_output(problem, f"```python\n{row['prompt']}    return None\n```")
        return right["parsed"], empty["correct"]

    with ThreadPoolExecutor(2) as pool:
        results = dict(zip((p.id for p in problems), pool.map(judged, problems)))
    assert {k: v for k, v in results.items() if v[0] != "passed" or v[1] != 0.0} == {}


def test_recitation_exact_match_hand_worked():
    p = la.Problem("gsm8k", "g", "Tom has 3 apples.", "How many?", "3", analysis="3 apples.")
    exact = "Tom has 3 apples.\n## Analysis\n3 apples.\n## Question\nHow many?\n## Answer"
    assert la.recitation_exact_match(exact, p) == {
        "evidence_em": 1.0,
        "question_em": 1.0,
        "retrieval_em": 1.0,
    }
    changed = exact.replace("Tom has", "Tom had")
    assert la.recitation_exact_match(changed, p) == {
        "evidence_em": 0.0,
        "question_em": 1.0,
        "retrieval_em": 0.0,
    }
    assert la.recitation_exact_match("", p)["retrieval_em"] == 0.0


def test_retrieve_then_solve_uses_only_the_recited_evidence():
    p = la.varsum_problems(1)[0]
    recited = "x_1 = 5\n## Question\n" + p.question + "\n## Answer"
    row = {
        "example_id": p.id,
        "key": "k1",
        "output": recited,
        "condition": la.condition("varsum", "recite", "essay", "between", 500),
    }
    (req,) = la.retrieve_then_solve_requests([p], [row])
    assert req.condition["mode"] == "retrieve_then_solve" and req.condition["filler_tokens"] == 500
    assert (
        "x_1 = 5\n# Question" in req.prompt
        and "x_2 =" not in req.prompt
        and "# Others" not in req.prompt
    )
    assert req.meta["recitation_key"] == "k1"


def test_drops_from_short_is_a_paired_difference():
    rows = []
    for i in range(4):
        rows.append(
            {
                "model": "m",
                "mode": "solve",
                "subtask": "s",
                "filler": "none",
                "placement": "none",
                "filler_tokens": 0,
                "example_id": f"e{i}",
                "correct": 1.0,
            }
        )
        rows.append(
            {
                "model": "m",
                "mode": "solve",
                "subtask": "s",
                "filler": "essay",
                "placement": "between",
                "filler_tokens": 100,
                "example_id": f"e{i}",
                "correct": float(i < 2),
            }
        )
    drops = length_alone_analysis.drops_from_short(pd.DataFrame(rows))
    (row,) = drops.to_dict("records")
    assert row["change"] == -50.0 and row["n"] == 4 and row["ci_high"] <= 0
    acc = length_alone_analysis.accuracy_by_length(pd.DataFrame(rows))
    # The length-0 baseline is copied under the essay curve
    assert list(acc["accuracy"]) == [1.0, 0.5]


def test_chapter_arms_give_each_placement_its_own_lengths_and_subtasks(public_data):
    """The chapter plan (longctx.chapters.length_alone) builds one request per problem and
    condition; length 0 is the shared short problem, never a "before" row."""
    from longctx.chapters import length_alone as chapter
    from longctx.runner import all_requests

    params = {
        "num_problems": 2,
        "seed": 0,
        "retrieve_then_solve": True,
        "arms": [
            {"subtasks": ["varsum", "gsm8k"], "kinds": ["whitespace"], "lengths": [0, 50, 100]},
            {
                "subtasks": ["gsm8k"],
                "kinds": ["whitespace"],
                "lengths": [0, 100],
                "placement": "before",
            },
        ],
    }
    reqs = all_requests(chapter.design.blocks(params))
    before = {
        (r.condition["subtask"], r.condition["filler_tokens"])
        for r in reqs
        if r.condition["placement"] == "before"
    }
    assert before == {("gsm8k", 100)}
    between = {
        (r.condition["subtask"], r.condition["filler_tokens"])
        for r in reqs
        if r.condition["placement"] == "between"
    }
    assert between == {(s, n) for s in ("varsum", "gsm8k") for n in (50, 100)}
    assert (
        len(reqs)
        == len({(r.example_id, repr(sorted(r.condition.items()))) for r in reqs})
        == 2 * 2 * 3 + 2
    )
    with pytest.raises(ParameterError, match="unknown subtask 'nope'"):
        chapter.design.blocks(
            {**params, "arms": [{"subtasks": ["nope"], "kinds": ["essay"], "lengths": [0]}]}
        )
    with pytest.raises(ParameterError, match="arm 0"):
        chapter.design.blocks({**params, "arms": [{"subtasks": ["gsm8k"], "lengths": [0]}]})


def test_paired_differences_compares_two_conditions_on_the_same_problems():
    rows = []
    for i in range(4):
        for placement, ok in (("between", i < 1), ("before", i < 3)):
            rows.append(
                {
                    "subtask": "s",
                    "filler_tokens": 100,
                    "placement": placement,
                    "example_id": f"e{i}",
                    "correct": float(ok),
                }
            )
    # Unpaired: left out
    rows.append(
        {
            "subtask": "s",
            "filler_tokens": 100,
            "placement": "before",
            "example_id": "only-before",
            "correct": 1.0,
        }
    )
    rows.append(
        {
            "subtask": "t",
            "filler_tokens": 100,
            "placement": "before",
            "example_id": "e0",
            "correct": 1.0,
        }
    )
    table = length_alone_analysis.paired_differences(
        pd.DataFrame(rows),
        condition="placement",
        control="between",
        treatment="before",
        by=["subtask", "filler_tokens"],
    )
    (row,) = table.to_dict("records")  # group "t" has no "between" side
    assert row["subtask"] == "s" and row["n"] == 4
    assert row["between"] == 25.0 and row["before"] == 75.0 and row["change"] == 50.0
    assert row["ci_low"] >= 0 and 0 < row["p_sign_flip"] <= 1


def test_gsm8k_without_final_step_drops_the_answer_line(public_data):
    full = la.load_problems("gsm8k", 5, seed=0)
    cut = la.load_problems("gsm8k_no_final_step", 5, seed=0)
    for p, q in zip(full, cut):
        steps = [s for s in p.analysis.splitlines() if s.strip()]
        assert q.id == p.id + ":no-final-step" and q.extra["source_id"] == p.id
        assert q.analysis == "\n".join(steps[:-1]) and steps[-1] not in q.analysis
        assert (q.evidence, q.question, q.answer) == (p.evidence, p.question, p.answer)
    (req,) = la.make_requests(cut[:1], filler_kinds=["essay"], lengths=[0])
    assert req.condition["subtask"] == "gsm8k_no_final_step" and cut[0].analysis in req.prompt
    # GSM8K's prompt and stop rule, with its own budget: solving takes longer than copying
    assert req.stop == la.stop_rule("gsm8k", "solve") and req.max_new_tokens == la.budget(
        "gsm8k_no_final_step", "solve"
    )
    assert la.budget("gsm8k_no_final_step", "solve") > la.budget("gsm8k", "solve")
    assert la.score_output(cut[0], f"So the answer is {cut[0].answer}.")["correct"] == 1.0


def test_hand_worked_final_step_removal():
    p = la.Problem(
        "gsm8k",
        "g-1",
        "Ann has 2 apples and buys 3.",
        "How many? x",
        "5",
        analysis="She buys 3 more.\nShe has 2 + 3 = 5 apples.",
    )
    q = la.without_final_step(p)
    assert q.analysis == "She buys 3 more." and q.subtask == "gsm8k_no_final_step"
    assert (
        la.without_final_step(
            la.Problem("gsm8k", "g-2", "e", "q", "1", analysis="1 apple.")
        ).analysis
        == ""
    )


def test_budgets_leave_room_for_the_answer():
    assert la.budget("varsum", "solve") >= 512 and la.budget("humaneval", "solve") >= 768
    assert all(la.budget(s, "recite") >= 1024 for s in ("varsum", "gsm8k", "mmlu", "humaneval"))


def test_problem_samples_are_prefix_stable(public_data):
    small = {p.id for p in la.gsm8k_problems(12, seed=0)}
    large = {p.id for p in la.gsm8k_problems(120, seed=0)}
    assert len(small) == 12 and small <= large
    assert {p.id for p in la.gsm8k_problems(12, seed=1)} != small


def test_varsum_values_read_counts_stated_and_correct_values_of_asked_variables():
    from longctx.tasks.length_alone import varsum_values_read

    prompt = "# Problem Description\nx_1 = 13\nx_2 = 27\nx_3 = 87\n# Question\nWhat is x_1 + x_3?"
    output = "We have \\( x_1 = 13 \\), x_3 = 3 and x_2 = 27. So 13 + 3 = 16."
    assert varsum_values_read(prompt, output) == (2, 1)  # x_2 is not asked; x_3 is misread
    assert varsum_values_read(prompt, "The answer is 100.") == (0, 0)


def test_ruler_blocks_ask_answer_and_recite_then_answer_from_the_recitation():
    from longctx.chapters import length_alone as chapter
    from longctx.chapters import scale

    params = {
        **scale("length_alone", "book"),
        "ruler": {"subtasks": ["qa1"], "lengths": [1500, 800], "num_questions": 2},
    }
    words = lambda text: len(text.split())  # noqa: E731 - a stand-in tokenizer: one token per word
    blocks = chapter.design.ruler_blocks(params, count_tokens=words)
    assert [b.name for b in blocks] == ["RULER qa1 800", "RULER qa1 1500"]  # shorter first
    block = blocks[0]
    assert block.experiment == "ruler_qa" and not block.headline
    assert sorted(r.condition["mode"] for r in block.requests) == [
        "answer",
        "answer",
        "recite",
        "recite",
    ]
    assert all(words(r.prompt) <= 800 for r in block.requests)
    recite = next(r for r in block.requests if r.condition["mode"] == "recite")
    row = {
        "example_id": recite.example_id,
        "condition": recite.condition,
        "output": "# Document 3\nThe recited text.\n",
    }
    second = block.followup([row])
    assert [r.condition["mode"] for r in second] == ["retrieve_then_answer", "answer_from_named"]
    assert "The recited text." in second[0].prompt and words(second[0].prompt) < 800
    assert (
        second[1].meta == {"named_documents": [3]} and "The recited text." not in second[1].prompt
    )


def test_ruler_parameters_are_checked():
    from longctx.chapters import length_alone as chapter
    from longctx.chapters import scale

    book = scale("length_alone", "book")
    assert chapter.design.ruler_blocks({**book, "ruler": None}) == []
    with pytest.raises(ParameterError, match="exactly"):
        chapter.design.ruler_blocks({**book, "ruler": {"subtasks": ["qa1"], "lengths": [300]}})
    with pytest.raises(ParameterError, match="reader's tokens"):
        chapter.design.ruler_blocks(
            {**book, "ruler": {"subtasks": ["qa1"], "lengths": [300], "num_questions": 1}}
        )


def test_the_recitation_premise_is_decided_only_when_the_rest_cannot_change_it():
    """20 problems, threshold 90.9%: two stored failures already cap the rate at 90.0%
    whatever the other 15 give (a bound that decides: premise not met); one failure
    decides nothing (NaN); all stored gives the rate itself."""
    from longctx.chapters import length_alone as chapter

    problems = {p.id: p for p in la.load_problems("gsm8k", 20, seed=0)}

    def row(p, exact):
        output = (
            f"{p.evidence}\n# Analysis\n{p.analysis}\n# Question\n{p.question}\n## Answer\n"
            if exact
            else "I cannot recall it."
        )
        condition = {"subtask": "gsm8k", "mode": "recite", "filler": "essay",
                     "placement": "between", "filler_tokens": 16000}  # fmt: skip
        return {"example_id": p.id, "condition": condition, "output": output}

    ps = list(problems.values())
    two_wrong = [row(p, k >= 2) for k, p in enumerate(ps[:5])]
    assert chapter.numbers.recited_facts(two_wrong, problems, "essay", 16000, 90.9) == {
        "recited": 90.0,
        "recited:bound": -1.0,
    }
    one_wrong = [row(p, k >= 1) for k, p in enumerate(ps[:5])]
    assert (
        chapter.numbers.recited_facts(one_wrong, problems, "essay", 16000, 90.9)["recited"]
        != (chapter.numbers.recited_facts(one_wrong, problems, "essay", 16000, 90.9)["recited"])
    )
    every = [row(p, k >= 1) for k, p in enumerate(ps)]
    assert chapter.numbers.recited_facts(every, problems, "essay", 16000, 90.9) == {"recited": 95.0}


def test_the_premise_outcome_names_each_filler_by_where_its_premise_stands():
    from longctx.chapters.length_alone.numbers import premise_outcome

    assert premise_outcome(
        {
            "la-essay": "premise not met",
            "la-whitespace": "premise not met",
            "la-mask": "premise not met",
        }
    ) == (
        "For this reader the premise fails with essay, whitespace and masked filler, so those "
        "drops are not evidence that length alone hurts despite perfect retrieval."
    )
    mixed = premise_outcome(
        {
            "la-essay": "reproduced",
            "la-whitespace": "premise not measured",
            "la-mask": "premise not met",
        }
    )
    assert mixed == (
        "For this reader the premise fails with masked filler, so that drop is not evidence "
        "that length alone hurts despite perfect retrieval; it is not measured yet with "
        "whitespace filler; it holds with essay filler, whose verdict stands on it."
    )


def test_the_relative_premise_keeps_the_problems_recited_without_filler_paired_by_problem():
    """10 problems: 8 recited with no filler; with essay filler 6 of those 8 and one of the two
    others are recited: recited_none 80%, kept 6/8 = 75% (the extra one does not count)."""
    from longctx.chapters import length_alone as chapter

    problems = {p.id: p for p in la.load_problems("gsm8k", 10, seed=0)}
    ps = list(problems.values())

    def row(p, exact, tokens):
        output = (
            f"{p.evidence}\n# Analysis\n{p.analysis}\n# Question\n{p.question}\n## Answer\n"
            if exact
            else "I cannot recall it."
        )
        condition = {"subtask": "gsm8k", "mode": "recite", "filler": "essay" if tokens else "none",
                     "placement": "between", "filler_tokens": tokens}  # fmt: skip
        return {"example_id": p.id, "condition": condition, "output": output}

    plain = [row(p, k < 8, 0) for k, p in enumerate(ps)]
    long = [row(p, k < 6 or k == 9, 16000) for k, p in enumerate(ps)]
    assert chapter.numbers.kept_facts(plain + long, problems, "essay", 16000) == {
        "recited_none": 80.0,
        "kept": 75.0,
    }
    # part of the long side stored: the relative fact waits; none recited: nothing to keep
    got = chapter.numbers.kept_facts(plain + long[:5], problems, "essay", 16000)
    assert got["recited_none"] == 80.0 and got["kept"] != got["kept"]
    none = chapter.numbers.kept_facts(
        [row(p, False, 0) for p in ps] + long, problems, "essay", 16000
    )
    assert none["recited_none"] == 0.0 and none["kept"] != none["kept"]
