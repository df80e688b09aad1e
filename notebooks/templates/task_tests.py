"""The task's metric on hand-worked cases, and its prompts as the paper builds them (copy to
``tests/test_newchapter.py``)."""

from longctx.tasks import newchapter as task


def test_score_is_one_when_the_output_holds_the_key():
    row = {"output": " 68432.", "gold": ("68432",)}
    assert task.score(row) == 1.0
    assert task.score({**row, "output": "6843"}) == 0.0


def test_the_key_sits_at_its_depth_and_the_examples_are_prefix_stable():
    first, last = task.haystack("11111", 4, 0.0), task.haystack("11111", 4, 1.0)
    assert first.startswith("The pass key is 11111") and last.endswith("is the pass key.")
    assert task.examples(3) == task.examples(5)[:3]
    requests = task.make_requests(task.examples(2), fillers=4, depths=[0.0, 0.5])
    assert len(requests) == 4 and {r.condition["depth"] for r in requests} == {0.0, 0.5}
