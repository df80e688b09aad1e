import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "longctx.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_unknown_model_is_a_one_line_error():
    done = _cli("run", "notebooks/kv_retrieval.py", "--model", "gpt-17")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("longctx: error: unknown model 'gpt-17'")


def test_missing_notebook_is_a_one_line_error():
    done = _cli("run", "notebooks/nope.py", "--model", "smollm2-135m-instruct")
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_models_lists_aliases():
    done = _cli("models")
    assert done.returncode == 0 and "qwen2.5-coder-0.5b-instruct" in done.stdout
