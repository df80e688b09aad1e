"""Identifier formats and C-NORM candidate formatting."""

import random
import re

import pytest

from longctx.errors import ParameterError
from longctx.formats import (
    check_delimiter,
    delimiter_label,
    format_identifier,
    format_passage,
    format_passages,
    hex_digits,
    identifier_pattern,
    infer_format,
    restore_passage,
    split_sentences,
)
from longctx.tasks import kv_retrieval as kv

UUID = "550e8400-e29b-41d4-a716-446655440000"


def test_paper_appendix_a_formats():
    # the three rows of the paper's appendix A example
    assert format_identifier(UUID, "-") == UUID
    assert format_identifier(UUID, "") == "550e8400e29b41d4a716446655440000"
    assert format_identifier(UUID, "&") == "550e8400&e29b&41d4&a716&446655440000"
    assert format_identifier("550e8400&e29b&41d4&a716&446655440000", "-") == UUID  # round trip


def test_long_identifiers_repeat_uuid_groups():
    digits = "0123456789abcdef" * 8  # 128 hex digits
    out = format_identifier(digits, ":")
    assert [len(g) for g in out.split(":")] == [8, 4, 4, 4, 12] * 4
    assert hex_digits(out) == digits
    assert infer_format(out) == (128, ":")
    with pytest.raises(ParameterError, match="multiple of 32"):
        format_identifier("abc", "-")


@pytest.mark.parametrize("delimiter", ["-", "", "&", ":", "_", "+", "/", "~", "||"])
def test_pattern_matches_its_own_format_only(delimiter):
    ident = format_identifier(UUID, delimiter)
    pat = identifier_pattern(32, delimiter)
    assert re.fullmatch(pat, ident)
    other = format_identifier(UUID, "#" if delimiter != "#" else "-")
    assert not re.fullmatch(pat, other)
    assert infer_format(ident) == (32, delimiter)


def test_uuid_pattern_string_is_unchanged():
    # stored stop rules of the key-value chapter hold this exact string
    assert identifier_pattern(32, "-") == kv.UUID_PATTERN


@pytest.mark.parametrize("bad", ["a", "0", '"', "\\", " ", "\n", 3])
def test_bad_delimiters_are_rejected(bad):
    with pytest.raises(ParameterError):
        check_delimiter(bad)


def test_labels():
    assert delimiter_label("-") == "UUID (-)" and delimiter_label("") == "plain text"
    assert delimiter_label("&") == "modified UUID (&)"


def test_split_sentences_is_lossless():
    text = "First one. Second!  Third? And a tail without stop"
    parts = split_sentences(text)
    assert "".join(parts) == text
    assert parts == ["First one. ", "Second!  ", "Third? ", "And a tail without stop"]


PASSAGE = (
    "The Eiffel Tower is in Paris. It was built in 1889 for the World's Fair. "
    "Gustave Eiffel's company designed it. Millions visit every year."
)


@pytest.mark.parametrize("delimiter", ["-", ":", "&", "~", "+", "/"])
@pytest.mark.parametrize("ratio", [0.0, 0.25, 0.5, 1.0])
def test_removing_the_delimiter_restores_the_passage(delimiter, ratio):
    out = format_passage(PASSAGE, delimiter, ratio, random.Random(3))
    assert restore_passage(out, delimiter) == PASSAGE
    n = len(split_sentences(PASSAGE))
    formatted = [s for s in split_sentences(out) if delimiter in s]
    assert len(formatted) == int(ratio * n + 0.5)
    # a reformatted sentence has no inner spaces left; the others are untouched
    for s in split_sentences(out):
        assert (" " not in s.rstrip()) or (s in split_sentences(PASSAGE))


def test_ratio_counts_round_half_up_and_are_seeded():
    text = "A b. C d. E f."  # 3 sentences: p = 0.5 -> 2 of them
    out = format_passage(text, "&", 0.5, random.Random(0))
    assert sum("&" in s for s in split_sentences(out)) == 2
    assert out == format_passage(text, "&", 0.5, random.Random(0))
    assert (
        format_passages([text, text], "&", 0.5, seed=1, ids=["x", "x"])[0]
        == format_passages([text], "&", 0.5, seed=1, ids=["x"])[0]
    )
    assert format_passages([text], None, 0.5, seed=1) == [text]


def test_passage_formatting_rejects_bad_input():
    with pytest.raises(ParameterError, match="non-empty"):
        format_passage(PASSAGE, "", 0.5, random.Random(0))
    with pytest.raises(ParameterError, match="ratio"):
        format_passage(PASSAGE, "-", 1.5, random.Random(0))


def test_kv_examples_in_any_format_keep_their_content():
    ex = kv.synthetic_examples(1, 5, seed=0)[0]
    for d in ["", "&", "/"]:
        f = ex.with_format(d)
        assert [hex_digits(k) for k, _ in f.pairs] == [hex_digits(k) for k, _ in ex.pairs]
        req = kv.make_requests([f], [1.0], extra_condition={"delimiter": d})[0]
        assert req.condition["delimiter"] == d and f'"{f.key}"' in req.prompt
        assert req.stop.answer_pattern == identifier_pattern(32, d)
        # the stop rule ends at the value, not at the echoed key
        cut, fired = req.stop.cut(f'The value of "{f.key}" is "{f.value}" and more')
        assert fired and cut.endswith(f.value)
    # the original examples and requests are unchanged by the format machinery
    assert kv.make_requests([ex], [1.0])[0].condition == {
        "num_pairs": 5,
        "gold_index": 4,
        "query_aware": False,
        "source": "synthetic",
    }


def test_high_density_examples_and_error_kinds():
    ex = kv.synthetic_examples(2, 3, seed=0, num_hex=128)[0].with_format("&")
    assert infer_format(ex.value) == (128, "&") and ex.example_id.startswith("syn-s0-k3-h128")
    req = kv.make_requests([ex], [1])[0]
    assert req.max_new_tokens == 4 * kv.MAX_NEW_TOKENS
    first_value = ex.with_gold_at(0).pairs[1][1]  # gold moved to index 0: pair 1 is a distractor
    row = {
        "prompt": kv.make_requests([ex], [1])[0].prompt,
        "gold": [ex.value],
        "output": first_value,
    }
    assert kv.returned_index(row) == 1 and kv.classify_error(row) == kv.ERROR_KINDS[1]
