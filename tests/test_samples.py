"""The worked example under each chapter's key figure: a right and a wrong answer."""

from longctx import samples
from longctx.report import elide


def _row(i, output, **condition):
    return {
        "key": f"k{i}",
        "task": "kv_retrieval",
        "example_id": f"e{i}",
        "condition": {"num_pairs": 10, **condition},
        "gold": ["abc"],
        "output": output,
        "prompt": f"prompt {i} <with> markup",
        "prompt_tokens": 1200,
    }


def test_a_long_prompt_is_cut_in_the_middle_with_the_count_left_out():
    text = "a" * 1000 + "b" * 3000 + "c" * 1000
    shown = elide(text, keep=1000)
    assert shown.startswith("a" * 1000) and shown.endswith("c" * 1000)
    assert "[... 3,000 characters left out ...]" in shown
    assert elide("short", keep=1000) == "short"


def test_the_first_right_and_the_first_wrong_row_are_picked_where_asked():
    rows = [_row(0, "xyz", num_pairs=30), _row(1, "abc"), _row(2, "nope"), _row(3, "abc")]
    right, wrong = samples.right_and_wrong(rows, {"num_pairs": 10})
    assert (right["key"], wrong["key"]) == ("k1", "k2")


def test_the_example_escapes_prompts_and_answers_and_says_when_one_side_is_missing():
    block = samples.example_html([_row(0, "<b>abc</b>")], what="10 pairs")
    assert block.startswith('<details class="example">')
    assert "&lt;b&gt;abc&lt;/b&gt;" in block and "prompt 0 &lt;with&gt; markup" in block
    assert "every stored answer here scored the same" in block and "Wrong" not in block
    assert samples.example_html([], what="nothing") == (
        "No stored generation under nothing to show as an example."
    )


def test_a_condition_matches_field_by_field_and_inside_nested_settings():
    condition = {"num_pairs": 10, "crossing": {"position": "middle", "tags": "none"}}
    assert samples.matches(condition, {"crossing": {"position": "middle"}})
    assert not samples.matches(condition, {"crossing": {"position": "first"}})
    assert not samples.matches(condition, {"num_pairs": 30})
    assert samples.matches(condition, {})
