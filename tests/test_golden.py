"""Behaviour guard for restructurings: the findings table computed from the committed rows is
the one saved in ``tests/golden/findings.json`` (every claim's difference, interval, n, p,
sides, verdict and the verdict's parts) for every claim the file holds. A change that moves a
number must update the golden file on purpose, in its own commit that says why: ``python
tests/test_golden.py`` rewrites it from the committed rows. A claim added after the file was
written is not guarded until then; once it is, its first verdict must be recorded in
``data/paper/verdict_changes.csv``, where every later move of it is logged."""

import json
import math
from pathlib import Path

import pytest

from longctx.claims import verdict_state
from longctx.findings import CHANGES_FILE, last_recorded, read_verdict_changes

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "findings.json"
NUMBERS = ("difference", "ci_low", "ci_high", "p", "stability", "paper_effect")
WORDS = (
    "id",
    "paper",
    "claim",
    "comparison",
    "paper_value",
    "n",
    "detail",
    "setting",
    "verdict",
    "kind",
    "direction",
    "magnitude",
    "premise",
    "chapter",
    "label",
)


@pytest.fixture(scope="module")
def rows(committed_findings):
    table = committed_findings
    return {r["id"]: r for r in json.loads(table.to_json(orient="records", double_precision=15))}


def test_findings_match_the_golden_file(rows):
    golden = {r["id"]: r for r in json.loads(GOLDEN.read_text(encoding="utf-8"))}
    # a claim added since (a new chapter's, say) is no restructuring: it may follow; none
    # of the golden claims may go missing or change places
    assert [c for c in rows if c in golden] == list(golden), "claims removed or reordered"
    for claim_id, want in golden.items():
        got = rows[claim_id]
        for name in WORDS:
            assert got[name] == want[name], (claim_id, name)
        for name in NUMBERS:
            a, b = got[name], want[name]
            assert (a is None and b is None) or math.isclose(a, b, rel_tol=0, abs_tol=1e-9), (
                claim_id,
                name,
                a,
                b,
            )


def test_every_golden_claim_has_its_verdict_recorded():
    """The record of verdict moves covers every claim the golden file holds, ending at its
    golden verdict: a claim enters the record when it enters the golden file."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    last = last_recorded(read_verdict_changes())
    unrecorded = [
        r["id"] for r in golden if last.get(r["id"]) != verdict_state(r["verdict"], r["stability"])
    ]
    assert not unrecorded, f"record these claims' verdicts in {CHANGES_FILE.name}: {unrecorded}"


def test_every_readers_verdict_and_its_moves_are_recorded(committed_matrix):
    """Every reader's judged (or not testable) cells end, in the record, at their state now:
    a new reader's first verdicts, and every later move with its reason."""
    from longctx.matrix import unrecorded_moves

    changes = read_verdict_changes()
    assert not unrecorded_moves(committed_matrix, changes)
    # a move with no row of its own fails, naming the reader and the claim
    folder, claim = "qwen2.5-coder-1.5b-instruct", "crossing-filler"
    undone = changes.iloc[:-1] if changes.iloc[-1]["claim"] == claim else changes
    undone = undone[
        ~((undone["reader"] == folder) & (undone["before"] != "") & (undone["claim"] == claim))
    ]
    assert any(folder in m and claim in m for m in unrecorded_moves(committed_matrix, undone))


if __name__ == "__main__":
    from longctx.findings import findings_table

    table = findings_table(ROOT / "data" / "results")
    GOLDEN.write_text(
        table[[*WORDS, *NUMBERS]].to_json(
            orient="records", indent=1, double_precision=15, force_ascii=False
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"wrote {GOLDEN} ({len(table)} claims)")
    recorded = set(read_verdict_changes()["claim"])
    if new := [c for c in table["id"] if c not in recorded]:
        print(f"now record the first verdicts of {new} in {CHANGES_FILE}")
