"""Prepare the chapter notebooks for nbval at CI scale.

nbval does not read jupytext ``.py`` files, so before collection every
``notebooks/*.py`` is converted to ``tests/_nb/<name>.ipynb`` with papermill's
``prepare_only`` injecting the small parameters below (smallest model, a few
prompts, results written under ``tests/_nb/results`` so committed results stay
untouched). ``pytest --nbval-lax`` then executes each notebook cell by cell.
"""

from pathlib import Path

ROOT = Path(__file__).parent
NB_DIR = ROOT / "tests" / "_nb"

CI_PARAMETERS = {
    # The findings page reads the committed rows; nothing is generated.
    "findings": {},
    # The backends page reads committed rows and the committed benchmark; nothing is generated.
    "backends": {},
    "kv_retrieval": {
        "model": "smollm2-135m-instruct",
        "num_pairs": [4, 6],
        "gold_positions": [0.0, 0.5, 1.0],
        "examples_per_cell": 2,
        "kv_source": "synthetic",
        "batch_size": 4,
        "results_dir": str(NB_DIR / "results"),
    },
    "multidoc_qa": {
        "model": "smollm2-135m-instruct",
        "num_questions": 2,
        "num_documents": [3, 4],
        "gold_positions": [0.0, 0.5, 1.0],
        "query_aware": [False, True],
        "open_domain_ks": [1, 2],
        "open_domain_questions": 2,
        "batch_size": 4,
        "results_dir": str(NB_DIR / "results"),
    },
    "cnorm": {
        "model": "smollm2-135m-instruct",
        "kv_formats": ["-", "", "&"],
        "kv_low_pairs": 4,
        "kv_high_pairs": 2,
        "kv_low_positions": [0.0, 1.0],
        "kv_high_positions": [1, 2],
        "kv_examples": 1,
        "kv_high_examples": 1,
        "sweep_delimiters": ["-", "", ":", "&"],
        "sweep_pairs": 4,
        "sweep_positions": [0.0, 1.0],
        "sweep_examples": 1,
        "attention_pairs": 4,
        "attention_positions": [1, 4],
        "qa_questions": 1,
        "qa_documents": 3,
        "qa_positions": [0.0, 1.0],
        "qa_seeds": [0, 1],
        "cnorm_candidates": ["none", "-", "&"],
        "calibration_questions": 2,
        "ratio_sweep": [1.0],
        "ratio_sweep_samples": 1,
        "longbench_data": str(ROOT / "tests" / "fixtures" / "longbench_v2_tiny.json"),
        "longbench_max_prompt_tokens": 256,
        "batch_size": 4,
        "results_dir": str(NB_DIR / "results"),
    },
    "semantic_competition": {
        "model": "smollm2-135m-instruct",
        "num_questions": 2,
        "hard_counts": [0, 2],
        "retrievers": ["bm25", "dense"],
        "matched_size": 4,
        "keep_hard": 1,
        "compare_questions": 1,
        "other_sizes": [3],
        "nq_questions": 1,
        "second_readers": ["qwen2.5-coder-0.5b-instruct"],
        "second_reader_questions": 1,
        "max_passages": 120,
        "batch_size": 4,
        "results_dir": str(NB_DIR / "results"),
    },
    "length_alone": {
        "model": "smollm2-135m-instruct",
        "num_problems": 2,
        "arms": [
            {"subtasks": ["gsm8k"], "kinds": ["essay", "whitespace", "mask"], "lengths": [0, 32]},
            {"subtasks": ["gsm8k"], "kinds": ["whitespace"], "lengths": [32], "placement": "before"},
            {"subtasks": ["gsm8k"], "kinds": ["space_tokens", "newline_tokens"], "lengths": [32]},
            {"subtasks": ["gsm8k_no_final_step"], "kinds": ["essay", "whitespace", "mask"], "lengths": [0, 32]},
            {"subtasks": ["mmlu"], "kinds": ["essay"], "lengths": [32], "mode": "recite"},
        ],
        "ruler": {"subtasks": ["qa1", "qa2"], "lengths": [2000], "num_questions": 1},
        "batch_size": 4,
        "results_dir": str(NB_DIR / "results"),
    },
    "crossing": {
        "model": "smollm2-135m-instruct",
        "num_questions": 3,
        "num_documents": 3,
        "pool_size": 40,
        "filler_tokens": 32,
        "batch_size": 8,
        "results_dir": str(NB_DIR / "results"),
    },
    "tag_needles": {
        "model": "smollm2-135m-instruct",
        "num_cases": 3,
        "lengths": [60, 120],
        "query_aware_lengths": [120],
        "long_length": 150,
        "long_num_cases": 2,
        "short_length": 60,
        "tagger_model": "smollm2-135m-instruct",
        "llm_tag_method": "hybrid",
        "chunk_chars": 300,
        "novelqa_dir": str(ROOT / "tests" / "fixtures" / "novelqa"),
        "novelqa_max_book_tokens": 100,
        "batch_size": 4,
        "results_dir": str(NB_DIR / "results"),
    },
}


def pytest_configure(config):
    if not config.getoption("nbval_lax", default=False) and not config.getoption("nbval", default=False):
        return
    import jupytext
    import papermill

    NB_DIR.mkdir(parents=True, exist_ok=True)
    for source in sorted((ROOT / "notebooks").glob("*.py")):
        params = CI_PARAMETERS.get(source.stem)
        if params is None:
            raise RuntimeError(f"add CI parameters for {source.name} to CI_PARAMETERS in conftest.py")
        staged = NB_DIR / f"{source.stem}.source.ipynb"
        nb = jupytext.read(source)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        jupytext.write(nb, staged, fmt="ipynb")
        papermill.execute_notebook(str(staged), str(NB_DIR / f"{source.stem}.ipynb"), parameters=params,
                                   prepare_only=True, kernel_name="python3")
        staged.unlink()
