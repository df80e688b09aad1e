from pathlib import Path

import pytest

from commands import run_cli
from longctx.chapters import PAGE_PARAMETERS

ROOT = Path(__file__).resolve().parents[1]


def test_unknown_model_is_a_one_line_error():
    done = run_cli("run", "notebooks/kv_retrieval.py", "--model", "gpt-17")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("longctx: error: unknown model 'gpt-17'")


def test_missing_notebook_is_a_one_line_error():
    done = run_cli("run", "notebooks/nope.py", "--model", "smollm2-135m-instruct")
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_models_lists_aliases():
    done = run_cli("models")
    assert done.returncode == 0 and "qwen2.5-coder-0.5b-instruct" in done.stdout


def test_failed_run_keeps_the_last_good_notebook_and_honours_results_dir_param(tmp_path):
    done_dir = tmp_path / "smollm2-135m-instruct" / "kv_retrieval"
    done_dir.mkdir(parents=True)
    (done_dir / "kv_retrieval.ipynb").write_text("last good run")
    # a source the chapter does not know fails while building prompts, before any model loads
    done = run_cli(
        "run",
        "notebooks/kv_retrieval.py",
        "--model",
        "smollm2-135m-instruct",
        "-p",
        "results_dir",
        str(tmp_path),
        "-p",
        "kv_source",
        "'nope'",
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("longctx: error in notebook: ParameterError")
    )
    assert (done_dir / "kv_retrieval.ipynb").read_text() == "last good run"
    assert (done_dir / "kv_retrieval.failed.ipynb").exists()
    assert not (
        ROOT
        / "data"
        / "results"
        / "smollm2-135m-instruct"
        / "kv_retrieval"
        / "kv_retrieval.failed.ipynb"
    ).exists()


def test_bad_backend_is_a_one_line_error_before_any_kernel():
    done = run_cli(
        "run", "notebooks/kv_retrieval.py", "--model", "smollm2-135m-instruct", "--backend", "vllm"
    )
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "unknown backend 'vllm'; use one of hf, llamacpp, openai" in done.stderr
    done = run_cli("reproduce", "--chapters", "kv_retrieval", "--backend", "openai", "--dry-run")
    assert done.returncode == 2 and "needs the server's URL" in done.stderr


def test_reproduce_dry_run_counts_a_backend_apart_and_only_selects_blocks(tmp_path):
    done = run_cli(
        "reproduce",
        "--chapters",
        "kv_retrieval",
        "--backend",
        "llamacpp",
        "--only",
        "10 pairs",
        "--results-dir",
        str(tmp_path),
        "--dry-run",
    )
    assert done.returncode == 0, done.stderr
    assert (
        "10 pairs" in done.stdout
        and "30 pairs" not in done.stdout
        and "140 pairs" not in done.stdout
    )
    assert "0 already stored" in done.stdout
    done = run_cli(
        "reproduce", "--chapters", "kv_retrieval", "--only", "no such block", "--dry-run"
    )
    assert done.returncode == 2 and "matches no block" in done.stderr


def test_reproduce_rejects_an_empty_chunk_before_loading_anything():
    done = run_cli("reproduce", "--chapters", "kv_retrieval", "--chunk-prompts", "0", "--dry-run")
    assert done.returncode == 2 and "--chunk-prompts must be at least 1" in done.stderr


def test_a_dry_run_refuses_a_store_line_that_a_real_run_would_refuse(tmp_path):
    store = tmp_path / "smollm2-135m-instruct" / "kv_retrieval"
    store.mkdir(parents=True)
    (store / "generations.jsonl").write_text('{"key": "k"}\nthis is not a row\n{"key": "j"}\n')
    done = run_cli(
        "reproduce", "--chapters", "kv_retrieval", "--scale", "ci", "--model",
        "smollm2-135m-instruct", "--results-dir", str(tmp_path), "--dry-run",
    )  # fmt: skip
    assert done.returncode == 2 and "line 2: not valid JSON" in done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "param, value, said",
    [
        ("nope", "1", "kv_retrieval has no parameter nope"),
        ("gold_positions", "[0.0, 1.0]", "needs depths [0.0, 0.5]"),
        ("num_pairs", "[]", "kv_retrieval.num_pairs is empty"),
        ("results_dir", "42", "results_dir must be a folder path"),
        ("batch_size", "0", "batch_size is a whole number of at least 1, not 0"),
        ("token_budget", "'big'", "token_budget is a whole number of at least 1, not 'big'"),
        ("examples_per_cell", "'many'", "kv_retrieval.examples_per_cell takes"),
        ("params", "{'nope': 1}", "unknown parameters for kv_retrieval: ['nope']"),
        ("params", "{'num_pairs': []}", "kv_retrieval.num_pairs is empty"),
        ("params", "[1]", "params must be a mapping of kv_retrieval's parameters"),
        ("scale", "'huge'", "chapter 'kv_retrieval' has no scale 'huge'"),
    ],
)
def test_a_notebook_parameter_the_chapter_cannot_use_is_one_line_before_any_kernel(
    param, value, said
):
    done = run_cli(
        "run", "notebooks/kv_retrieval.py", "--model", "smollm2-135m-instruct", "-p", param, value
    )
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1


def test_run_help_lists_every_page_parameter_a_page_cell_leaves_out():
    done = run_cli("run", "--help")
    listed = done.stdout.split("every chapter page's parameters")[1]
    assert all(f"  {name} " in listed for name in PAGE_PARAMETERS if name != "model"), listed
