import pytest

from longctx.requests import Generation, Request
from longctx.results import paired_effects
from longctx.runner import make_row
from longctx.store import ResultsStore
from longctx.tables import load_experiment, provenance


def _store_rows(root, model, outputs, backend="hf"):
    folder = model.replace("/", "--") + ("" if backend == "hf" else f"--{backend}")
    store = ResultsStore(root, folder, "exp")
    rows = []
    for i, out in enumerate(outputs):
        req = Request(
            task="kv", example_id=f"e{i}", prompt=f"p{i}", gold=("abc",), condition={"num_pairs": 3}
        )
        gen = Generation(out, out, 10 + i, 2, True, 1.0, 1)
        rows.append(
            make_row(
                f"{model}-{i}",
                req,
                gen,
                model=model,
                fingerprint="fp",
                prompt_mode="auto",
                rendered_prompt=req.prompt,
                params={},
                backend=backend,
            )
        )
    store.append(rows)


def test_load_experiment_has_every_model_scored_and_captioned(tmp_path):
    _store_rows(tmp_path, "model-a", ["ABC", "xyz"])
    _store_rows(tmp_path, "org/model-b", ["it is abc"])
    table = load_experiment(
        tmp_path, "exp", score=lambda r: float(r["gold"][0] in r["output"].lower())
    )
    assert sorted(table["model"].unique()) == ["model-a", "org/model-b"]
    assert table.groupby("model")["correct"].mean().to_dict() == {
        "model-a": 0.5,
        "org/model-b": 1.0,
    }
    assert set(table.columns) >= {
        "num_pairs",
        "prompt",
        "gold",
        "output",
        "prompt_tokens",
        "longctx_version",
    }
    caption = provenance(table, tmp_path, "exp")
    assert "model-a: 2 generations" in caption and "org/model-b: 1 generations" in caption


def test_two_backends_of_one_model_are_two_lines_with_their_own_files(tmp_path):
    _store_rows(tmp_path, "model-a", ["ABC", "xyz"])
    _store_rows(tmp_path, "model-a", ["abc", "abc"], backend="llamacpp")
    table = load_experiment(
        tmp_path, "exp", score=lambda r: float(r["gold"][0] in r["output"].lower())
    )
    assert table.groupby("model")["correct"].mean().to_dict() == {
        "model-a": 0.5,
        "model-a (llamacpp)": 1.0,
    }
    assert set(table["backend"]) == {"hf", "llamacpp"} and set(table["model_name"]) == {"model-a"}
    caption = provenance(table, tmp_path, "exp")
    assert "model-a: 2 generations in `" + tmp_path.name + "/model-a/exp/" in caption
    assert (
        "model-a (llamacpp): 2 generations in `" + tmp_path.name + "/model-a--llamacpp/exp/"
        in caption
    )


def test_provenance_names_the_committed_folder_from_the_repository_root():
    from longctx.paths import repo_root

    table = load_experiment(repo_root() / "data" / "results", "kv_retrieval", score=lambda r: 1.0)
    caption = provenance(table, repo_root() / "data" / "results", "kv_retrieval")
    assert (
        "generations in `data/results/qwen2.5-coder-0.5b-instruct/kv_retrieval/generations.jsonl.xz`"
        in caption
    )
    shown = table[table["model"] == "qwen2.5-coder-0.5b-instruct"].head(10)
    part = provenance(shown, repo_root() / "data" / "results", "kv_retrieval")
    held = len(ResultsStore(repo_root() / "data" / "results", "qwen2.5-coder-0.5b-instruct",
                            "kv_retrieval").keys())  # fmt: skip
    assert f"10 of the {held:,} generations in `" in part  # what it shows, of what is stored
    # the weights, backend, device and dtype behind the rows, and the commit of the build
    assert "(qwen2.5-coder-0.5b-instruct-q4_k_m.gguf, hf, " in caption
    assert "bfloat16" in caption and "Built from commit " in caption


def test_load_experiment_filters_by_task(tmp_path):
    _store_rows(tmp_path, "model-a", ["abc"])
    assert load_experiment(tmp_path, "exp", score=lambda r: 1.0, task="other").empty


def test_paired_effects_by_length_and_pooled():
    import pandas as pd

    rows = []
    for k in (10, 20):
        for ex in range(4):
            for pos in (1, 2):
                rows.append(
                    {
                        "model": "m",
                        "k": k,
                        "example_id": f"e{ex}",
                        "position": pos,
                        "cond": "a",
                        "correct": 1.0,
                    }
                )
                # treatment loses every item at k=20 only
                rows.append(
                    {
                        "model": "m",
                        "k": k,
                        "example_id": f"e{ex}",
                        "position": pos,
                        "cond": "b",
                        "correct": 1.0 if k == 10 else 0.0,
                    }
                )
    effects = paired_effects(
        pd.DataFrame(rows),
        condition="cond",
        control="a",
        treatment="b",
        length="k",
        item=["example_id", "position"],
    )
    by_k = {e["k"]: e for e in effects}
    assert by_k[10]["difference"] == by_k[10]["ci_low"] == by_k[10]["ci_high"] == 0.0
    assert by_k[20]["difference"] == -100.0 and by_k["all"]["difference"] == -50.0
    assert by_k["all"]["items"] == 16
    only_a = pd.DataFrame([r for r in rows if r["cond"] == "a"])
    assert (
        paired_effects(
            only_a,
            condition="cond",
            control="a",
            treatment="b",
            length="k",
            item=["example_id", "position"],
        )
        == []
    )


def test_paired_comparison_zero_and_known_effects():
    import pandas as pd

    from longctx.results import paired_comparison

    base = pd.DataFrame(
        {
            "example_id": ["a", "a", "b", "b", "c", "c"],
            "pos": [0, 1] * 3,
            "correct": [1, 0, 1, 1, 0, 0],
        }
    )
    same = pd.concat([base.assign(method="x"), base.assign(method="y")])
    out = paired_comparison(
        same, condition="method", control="x", treatment="y", item=["example_id", "pos"]
    )
    # identical conditions: a difference of exactly zero, p = 1, an interval containing 0
    assert (
        out["difference"] == 0
        and out["p_sign_flip"] == 1.0
        and out["ci_low"] <= 0 <= out["ci_high"]
    )
    better = pd.concat([base.assign(method="x", correct=0), base.assign(method="y", correct=1)])
    out = paired_comparison(
        better, condition="method", control="x", treatment="y", item=["example_id", "pos"]
    )
    # +1 on every item of 3 clusters: the exact sign-flip p is 2/8
    assert (
        out["difference"] == 1
        and out["clusters"] == 3
        and out["p_sign_flip"] == pytest.approx(0.25)
    )
    missing = paired_comparison(
        same, condition="method", control="x", treatment="z", item=["example_id", "pos"]
    )
    assert missing["items"] == 0


def test_position_gap_permutation_repeats_the_selection():
    import numpy as np
    import pandas as pd

    from longctx.results import position_gap_permutation

    rng = np.random.default_rng(1)
    # No position effect: 12 questions, 3 positions, independent coin flips.
    noise = pd.DataFrame(rng.integers(0, 2, size=(12, 3)), columns=[1, 10, 20])
    res = position_gap_permutation(noise, n_resamples=2000)
    assert res["null_mean"] > 5  # selecting best and worst after the fact makes a gap from nothing
    assert res["p"] > 0.05
    # A strong effect: first position always right, others always wrong.
    strong = pd.DataFrame({1: [1.0] * 30, 10: [0.0] * 30, 20: [0.0] * 30})
    res = position_gap_permutation(strong, n_resamples=2000)
    assert res["gap"] == 100.0 and res["p"] < 0.001 and res["units"] == 30


def test_pooled_paired_effect_clusters_by_example_across_lengths():
    """The pooled ('all') row must resample examples, not (length, example) pairs: an example
    asked at two lengths counts once."""
    import pandas as pd

    from longctx.results import paired_effects

    rows = []
    for q in range(8):
        for k in (10, 20):
            for cond in ("a", "b"):
                rows.append(
                    {
                        "model": "m",
                        "example_id": f"q{q}",
                        "num_documents": k,
                        "position": 1,
                        "query": cond,
                        "correct": float(cond == "b" and q < 4),
                    }
                )
    effects = {
        e["num_documents"]: e
        for e in paired_effects(
            pd.DataFrame(rows),
            condition="query",
            control="a",
            treatment="b",
            length="num_documents",
            item=["example_id", "position"],
        )
    }
    lo, hi = effects["all"]["ci_low"], effects["all"]["ci_high"]
    lo10, hi10 = effects[10]["ci_low"], effects[10]["ci_high"]
    # Duplicating every example across two lengths adds no information: same width as one length.
    assert abs((hi - lo) - (hi10 - lo10)) < 8


def test_comparable_rows_are_other_runs_of_the_same_requests(tmp_path):
    from longctx.tables import comparable_rows

    _store_rows(tmp_path, "model-a", ["abc", "x"])
    _store_rows(tmp_path, "model-a", ["abc", "abc"], backend="llamacpp")
    _store_rows(tmp_path, "model-b", ["abc", "abc", "abc"])
    asked = [
        Request(task="kv", example_id="e0", prompt="p0", gold=("abc",), condition={"num_pairs": 3}),
        Request(task="kv", example_id="e1", prompt="p1", gold=("abc",), condition={"num_pairs": 3}),
    ]
    rows = comparable_rows(tmp_path, "exp", asked, exclude="model-a")
    assert sorted((r["model"], r.get("backend"), r["example_id"]) for r in rows) == [
        ("model-a", "llamacpp", "e0"),
        ("model-a", "llamacpp", "e1"),
        ("model-b", "hf", "e0"),
        ("model-b", "hf", "e1"),
    ]
    other_condition = [
        Request(task="kv", example_id="e0", prompt="p0", gold=("abc",), condition={"num_pairs": 4})
    ]
    assert comparable_rows(tmp_path, "exp", other_condition) == []


def test_reader_contrast_hand_worked():
    """Reader A: first 1, middle 0 on both examples (effect -1); reader B: first 1, middle 1
    on e1 and first 1, middle 0 on e2 (effect -0.5): B - A = +0.5."""
    import pandas as pd

    from longctx.results import reader_contrast

    # E3: B alone, left out
    rows = [
        ("A", "e1", "first", 1),
        ("A", "e1", "middle", 0),
        ("A", "e2", "first", 1),
        ("A", "e2", "middle", 0),
        ("B", "e1", "first", 1),
        ("B", "e1", "middle", 1),
        ("B", "e2", "first", 1),
        ("B", "e2", "middle", 0),
        ("B", "e3", "first", 1),
    ]
    table = pd.DataFrame(rows, columns=["model", "example_id", "depth", "correct"])
    out = reader_contrast(
        table,
        readers=["A", "B"],
        condition="depth",
        control="first",
        treatment="middle",
        item=["example_id"],
    )
    assert out["items"] == 2 and out["A"]["effect"] == -1.0 and out["B"]["effect"] == -0.5
    assert (
        out["difference"]["effect"] == 0.5
        and out["difference"]["ci_low"] <= 0.5 <= out["difference"]["ci_high"]
    )
    import pytest

    with pytest.raises(ValueError, match="both readers need both conditions"):
        reader_contrast(
            table[table["depth"] == "first"],
            readers=["A", "B"],
            condition="depth",
            control="first",
            treatment="middle",
            item=["example_id"],
        )


def test_a_figure_point_links_exactly_the_rows_behind_it(tmp_path):
    """The link names the point's conditions, and its examples too when the store holds more
    rows of those conditions than the point was drawn from."""
    import json
    from urllib.parse import unquote

    from longctx.store import ResultsStore
    from longctx.tables import point_links, rows_table

    def row(i, gold_index):
        return {
            "key": f"k{i}", "model": "smollm2-135m-instruct", "task": "kv_retrieval",
            "example_id": f"e{i}", "condition": {"gold_index": gold_index, "num_pairs": 10},
            "gold": ["v"], "prompt": "p", "output": "v", "prompt_tokens": 5, "new_tokens": 1,
            "seconds_per_prompt": 0.1, "longctx_version": "0", "params": {},
        }  # fmt: skip

    rows = [row(0, 0), row(1, 0), row(2, 5)]
    store = ResultsStore(tmp_path, "smollm2-135m-instruct", "kv_retrieval")
    store.dir.mkdir(parents=True)
    (store.dir / ResultsStore.FILENAME).write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = rows_table([rows[0], rows[2]], lambda r: 1.0)  # the figure drew e0 and e2
    links = point_links(table, ("model", "gold_index"), tmp_path, "kv_retrieval")
    first = unquote(links({"model": "smollm2-135m-instruct", "gold_index": 0}))
    assert first == (
        "../downloads/smollm2-135m-instruct__kv_retrieval.html"
        "#condition=gold_index: 0; num_pairs: 10&rows=k0"
    )
    other = unquote(links({"model": "smollm2-135m-instruct", "gold_index": 5}))
    assert other.endswith("#condition=gold_index: 5; num_pairs: 10")  # every such row is e2
    assert links({"model": "smollm2-135m-instruct", "gold_index": 9}) is None
