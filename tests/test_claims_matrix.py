"""What a reader's claims cost and the claims x readers matrix: the claims scale's dry run
counts prompt tokens with the reader's own tokenizer, says which claims fit its window, and
writes the plan the findings matrix reads."""

import json
import subprocess
import sys
from pathlib import Path

from longctx.chapters import get_chapter, scale
from longctx.reader import Reader
from longctx.runner import PromptTokens, block_keys

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = "qwen2.5-coder-0.5b-instruct"


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "longctx.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_prompt_tokens_counted_without_weights_match_the_stored_rows():
    """The dry run's count is the count the backend made when it generated the rows."""
    reader = Reader(DEFAULT)
    count = PromptTokens(reader)
    params = scale("semantic_competition", "claims")
    block = get_chapter("semantic_competition").plan(params)[0]
    stored = {r["key"]: r for r in reader.store(ROOT / "data" / "results", block.experiment).rows()}
    pairs = list(zip(block.requests, block_keys(block, reader)))[:12]
    assert pairs and all(k in stored for _, k in pairs)
    assert [count(r.prompt, r.system) for r, _ in pairs] == [
        stored[k]["prompt_tokens"] for _, k in pairs
    ]
    assert count.window == 32768


def test_claims_dry_run_writes_what_each_claim_costs_and_whether_it_fits(tmp_path):
    done = _cli(
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
