"""C-NORM experiment helpers: OAA/OPA, delimiter selection, passage normalization, cached scoring."""

import random
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from longctx.attention import attention_rows
from longctx.chapters.cnorm import method as cnorm
from longctx.errors import ParameterError
from longctx.formats import restore_passage
from longctx.reader import Reader
from longctx.store import ResultsStore
from longctx.tasks import multidoc_qa as qa


def test_oaa_opa_hand_worked():
    # positions 0, 1, 2 with accuracies 1/2, 1, 0 -> OAA = 0.5, OPA = 1 at position 2 (1-based)
    table = pd.DataFrame(
        {"fmt": ["a"] * 6, "gold_index": [0, 0, 1, 1, 2, 2], "correct": [1, 0, 1, 1, 0, 0]}
    )
    out = cnorm.oaa_opa(table, ["fmt"]).iloc[0]
    assert out.OAA == pytest.approx(0.5) and out.OPA == 1.0 and out.best_position == 2
    assert out.position_sd == pytest.approx(pd.Series([0.5, 1.0, 0.0]).std())


def test_select_delimiter_is_the_argmax_of_mean_abs():
    scores = {"none": [0.1, 0.2, 0.3], "-": [0.5, 0.1, 0.0], "&": [0.2, 0.2, 0.9]}
    assert cnorm.select_delimiter(scores) == "&"  # means .2, .2, .433
    assert cnorm.select_delimiter(scores, samples=1) == "-"  # first prompt only: .1, .5, .2
    assert cnorm.select_delimiter({"a": [0.5], "b": [0.5]}) == "a"  # ties: first listed
    assert cnorm.select_delimiter(scores, samples=2, rng=random.Random(0)) in scores
    with pytest.raises(ParameterError, match="samples"):
        cnorm.select_delimiter(scores, samples=4)
    with pytest.raises(ParameterError, match="same prompts"):
        cnorm.select_delimiter({"a": [1.0], "b": [1.0, 2.0]})


def _example(i=0):
    docs = tuple(
        qa.Document(f"T{j}", f"Distractor {j} one. It has two sentences.") for j in range(4)
    )
    return qa.QAExample(
        f"q{i}",
        "who wrote it?",
        ("Ann Lee",),
        qa.Document("Gold", "Ann Lee wrote it. In 1990."),
        docs,
    )


def test_normalize_example_touches_only_passage_text():
    ex = _example()
    out = cnorm.normalize_example(ex, "&", 1.0, seed=0)
    assert out.question == ex.question and out.answers == ex.answers
    assert [d.title for d in out.distractors] == [d.title for d in ex.distractors]
    assert out.gold.text == "Ann&Lee&wrote&it. In&1990."
    assert restore_passage(out.gold.text, "&") == ex.gold.text
    assert cnorm.normalize_example(ex, "none", 0.5, seed=0) == ex


def test_qa_requests_share_documents_across_methods():
    ex = _example()

    def asked(method="baseline", delimiter="none", ratio=0.5, positions=(0.0, 1.0), seed=1):
        return cnorm.qa_requests(
            [ex],
            num_documents=4,
            positions=list(positions),
            seed=seed,
            method=method,
            delimiter=delimiter,
            ratio=ratio,
        )

    base, norm = asked(), asked("C-NORM", "&", 1.0)
    assert [r.condition["gold_index"] for r in base] == [0, 3]
    assert base[0].condition["delimiter"] == "none" and base[0].condition["ratio"] == 0.0
    assert norm[0].condition["delimiter"] == "&" and norm[0].condition["method"] == "C-NORM"
    for b, n in zip(base, norm):
        # Same documents, same order, only the format differs
        assert restore_passage(n.prompt, "&") == b.prompt
    other_seed = asked(positions=(0.0,), seed=2)
    assert sorted(other_seed[0].prompt.splitlines()) != [] and other_seed[0].condition["seed"] == 2


def test_selection_prompts_differ_only_in_format():
    prompts = cnorm.selection_prompts(
        [_example(0), _example(1)], ["none", "-", "~"], num_documents=4, ratio=0.5
    )
    assert set(prompts) == {"none", "-", "~"} and all(len(v) == 2 for v in prompts.values())
    for i in range(2):
        # The template has no "~"
        assert restore_passage(prompts["~"][i], "~") == prompts["none"][i]


def test_kv_format_requests_pair_formats():
    reqs = cnorm.kv_format_requests(
        delimiters=["-", ""], density="low", num_pairs=4, positions=[0.0, 1.0], examples=2
    )
    assert len(reqs) == 2 * 2 * 2
    uuid_reqs = [r for r in reqs if r.condition["delimiter"] == "-"]
    plain = [r for r in reqs if r.condition["delimiter"] == ""]
    assert [r.prompt.replace("-", "") for r in uuid_reqs] == [r.prompt for r in plain]
    with pytest.raises(ParameterError, match="density"):
        cnorm.kv_format_requests(
            delimiters=["-"], density="medium", num_pairs=4, positions=[0.0], examples=1
        )


class _Tok:
    def __call__(self, text, add_special_tokens=False):
        return SimpleNamespace(input_ids=[ord(c) % 97 for c in text][:40])


def test_attention_rows_are_cached(tmp_path):
    import transformers as tf

    from longctx.backends.hf import HFBackend

    torch.manual_seed(0)
    tiny = tf.Qwen2ForCausalLM(
        tf.Qwen2Config(
            vocab_size=97,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
        )
    )
    calls = []
    lm = SimpleNamespace(
        model=tiny.eval(),
        tokenizer=_Tok(),
        device="cpu",
        render=lambda p: p,
        check_fits=lambda n, m: None,
    )
    # the hf backend's attention capability, on the tiny model
    lm.final_token_attention = lambda rendered, layer=-1: HFBackend.final_token_attention(
        lm, rendered, layer
    )

    def load():
        calls.append(1)
        return lm

    store = ResultsStore(tmp_path, "smollm2-135m-instruct", "cnorm_selection")
    items = [
        {"prompt": "hello world, a test", "candidate": "-"},
        {"prompt": "another prompt here", "candidate": ":"},
    ]
    reader = Reader("smollm2-135m-instruct")
    rows = attention_rows(items, store, reader, load=load, keep_vector=True, progress=False)
    assert len(calls) == 1 and [r["candidate"] for r in rows] == ["-", ":"]
    assert 0 <= rows[0]["abs"] <= 1 and len(rows[0]["attention"]) == rows[0]["tokens"]
    again = attention_rows(items, store, reader, load=load, keep_vector=True, progress=False)
    assert len(calls) == 1 and [r["abs"] for r in again] == [r["abs"] for r in rows]


def test_oaa_opa_table_intervals():
    # two examples, two positions: position 0 always right, position 1 always wrong -> OAA .5, OPA 1 at position 1
    table = pd.DataFrame(
        {
            "m": "x",
            "example_id": ["a", "a", "b", "b"],
            "gold_index": [0, 1, 0, 1],
            "correct": [1, 0, 1, 0],
        }
    )
    row = cnorm.oaa_opa_table(table, ["m"]).iloc[0]
    assert row.OAA == 0.5 and row.OPA == 1.0 and row.best_position == 1 and row.n == 4
    # every example has mean .5, so resampling examples cannot move OAA
    assert (row["OAA_low"], row["OAA_high"]) == (0.5, 0.5)
    lo, hi = row["OPA_low"], row["OPA_high"]
    assert lo < 1.0 and hi == 1.0  # Wilson at 2/2


def test_tokens_accuracy_correlation_is_paired_and_handles_the_ceiling():
    import pandas as pd

    from longctx.chapters.cnorm.method import tokens_accuracy_correlation

    rows = []
    for ex in range(30):
        for d, tokens, p_right in [
            ("-", 100, 0.9),
            ("", 80, 1.0),
            ("&", 130, 0.5),
            (":", 120, 0.6),
        ]:
            rows.append(
                {
                    "delimiter": d,
                    "example_id": ex,
                    "prompt_tokens": tokens,
                    "correct": int((ex * 7 % 10) / 10 < p_right),
                }
            )
    out = tokens_accuracy_correlation(pd.DataFrame(rows), n_resamples=300)
    assert out["r"] < -0.9 and out["ci_high"] < 0 and out["formats"] == 4 and out["examples"] == 30
    ceiling = pd.DataFrame(rows).assign(correct=1)
    flat = tokens_accuracy_correlation(ceiling, n_resamples=50)
    assert flat["r"] != flat["r"] and flat["undefined_share"] == 1.0


def _qa_row(example_id, method, delimiter, seed, correct):
    return {
        "key": f"{example_id}-{method}-{seed}",
        "model": "m",
        "example_id": example_id,
        "task": qa.TASK,
        "condition": {
            "method": method,
            "delimiter": delimiter,
            "seed": seed,
            "num_documents": 10,
            "gold_index": 0,
        },
        "prompt": "p",
        "gold": ["yes"],
        "output": "yes" if correct else "no",
        "prompt_tokens": 10,
        "new_tokens": 1,
        "seconds_per_prompt": 1.0,
        "longctx_version": "0",
    }


def test_a_shortest_tokenization_that_abs_chooses_is_the_c_norm_arm_on_the_first_ordering():
    from longctx.chapters import cnorm as chapter

    ids = [e.example_id for e in qa.read_oracle()[:3]]
    rows = [
        _qa_row(i, method, delim, seed, correct)
        for i in ids
        for seed in (0, 1)
        for method, delim, correct in (("baseline", "none", True), ("C-NORM", "-", i != ids[0]))
    ]
    store = SimpleNamespace(rows=lambda: rows)
    reader = SimpleNamespace(store=lambda results_dir, experiment: store)
    params = {"qa_questions": 3, "qa_documents": 10, "qa_seeds": [0, 1]}
    table = chapter.numbers.qa_table("unused", params, reader, chosen="-", shortest="-")
    control = table[table["method"] == "shortest tokenization"]
    assert len(control) == 3 and set(control["seed"]) == {0}  # C-NORM's first ordering
    tests = chapter.numbers.qa_tests(table, params).set_index(["comparison", "seeds"])
    both = tests.loc[("shortest tokenization - baseline", "all seeds")]
    same = tests.loc[("C-NORM - baseline", "seed 0")]
    assert both["difference"] == same["difference"] == pytest.approx(-100 / 3)
    # distinct delimiters: nothing is copied
    table = chapter.numbers.qa_table("unused", params, reader, chosen="-", shortest=":")
    assert "shortest tokenization" not in set(table["method"])
