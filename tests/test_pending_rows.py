"""The background-rows script's choices end in one clear line: an unknown arm, an option of
another chapter, and ranking the fixes by a reader whose arms are not all answered."""

import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "pending_rows", Path(__file__).resolve().parents[1] / "scripts" / "pending_rows.py"
)
pending_rows = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(pending_rows)


def refusal(capsys, *argv) -> str:
    assert pending_rows.main(list(argv)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_an_unknown_arm_is_named_with_the_chapters_arms(capsys):
    line = refusal(capsys, "mitigations", "--arms", "shuffle,bogus", "--dry-run")
    assert "unknown arms ['bogus']" in line and "sort_3" in line


def test_arms_belong_to_the_mitigations_chapter(capsys):
    line = refusal(capsys, "effective_length", "--arms", "shuffle", "--dry-run")
    assert "unknown parameters for effective_length: ['arms']" in line


def test_the_strongest_fixes_wait_for_every_arm_of_the_ranking_reader(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.setattr(pending_rows, "repo_root", lambda: tmp_path)  # an empty results folder
    line = refusal(
        capsys, "mitigations", "--scale", "ci", "--strongest-by", "smollm2-135m-instruct"
    )
    assert "smollm2-135m-instruct has no complete baseline" in line


def test_arms_by_hand_and_by_another_readers_ranking_are_not_both_taken(capsys):
    line = refusal(
        capsys, "mitigations", "--arms", "shuffle", "--strongest-by", "smollm2-135m-instruct"
    )
    assert "give --arms or --strongest-by, not both" in line


def test_the_mitigations_rows_are_answered_for_every_arm_by_default():
    from longctx.chapters.scales import read_scales

    sets = read_scales("mitigations")
    assert pending_rows.SCALES["mitigations"] == "all_arms"
    assert set(sets["all_arms"]["arms"]) >= set(sets["book"]["arms"])
