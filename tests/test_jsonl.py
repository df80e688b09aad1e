"""Rows survive every character: U+2028, U+2029 and U+0085 through append, read, pack, merge
and replay (str.splitlines splits at each of them)."""

import json
import lzma

import pytest

from longctx.errors import DataFileError
from longctx.jsonl import (
    LongLine,
    NotUtf8Line,
    dumps_line,
    iter_lines,
    iter_text_lines,
    split_lines,
)
from longctx.store import ResultsStore
from longctx.tagging import TagCache
from rows import stored_row

BREAKERS = ["\u2028", "\u2029", "\u0085"]


@pytest.mark.parametrize("char", BREAKERS)
def test_a_line_breaker_is_escaped_on_write_and_the_line_reads_back(char):
    line = dumps_line({"key": "k", "output": f"a{char}b"})
    assert char not in line and line.count("\n") == 1
    assert split_lines((line + line).encode()) == [line[:-1], line[:-1]]


def test_lines_split_at_newline_only_even_when_written_raw():
    raw = '{"key": "k", "output": "a\u2028b"}\n{"key": "j"}\r\n'
    assert split_lines(raw.encode()) == ['{"key": "k", "output": "a\u2028b"}', '{"key": "j"}']
    chunks = ['data: {"t": "a\u2028', 'b"}\n\nda', "ta: [DONE]\n"]
    assert list(iter_text_lines(chunks)) == ['data: {"t": "a\u2028b"}', "", "data: [DONE]"]


@pytest.mark.parametrize("char", BREAKERS)
def test_a_row_holding_a_line_breaker_survives_append_pack_and_merge(tmp_path, char):
    rows = [stored_row(f"k{i}", output=f"a{char}b{i}", prompt=f"p{char}") for i in range(3)]
    store = ResultsStore(tmp_path, "m", "exp")
    store.append(rows[:2])
    assert store.rows() == rows[:2] and store.keys() == {"k0", "k1"}
    store.pack()
    assert store.rows() == rows[:2]
    # a flat copy written raw (an older writer, or another tool) merges too
    copy = tmp_path / "m__exp.jsonl.xz"
    raw = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    assert char in raw
    copy.write_bytes(lzma.compress(raw.encode()))
    assert store.merge(copy) == 1
    store.pack()
    assert store.rows() == rows


@pytest.mark.parametrize("char", BREAKERS)
def test_a_plain_store_written_raw_reads_back(tmp_path, char):
    store = ResultsStore(tmp_path, "m", "exp")
    store.dir.mkdir(parents=True)
    raw = json.dumps({"key": "k", "output": f"a{char}b"}, ensure_ascii=False) + "\n"
    store.path.write_text(raw, encoding="utf-8")
    assert store.rows() == [{"key": "k", "output": f"a{char}b"}] and store.keys() == {"k"}


def test_only_an_unfinished_last_line_may_be_cut_inside_a_character():
    """A write killed inside "é" leaves bytes that are not UTF-8 at the file's end: that line
    reads as torn (never valid JSON); the same bytes anywhere else are an error naming the
    line. The streaming reader splits before decoding too, and refuses a line too long to
    hold before holding it."""
    whole, cut = '{"output": "caf\u00e9"}\n'.encode(), b'{"output": "caf' + "é".encode()[:1]
    assert split_lines(whole + cut, torn_tail=True)[0] == '{"output": "café"}'
    assert split_lines(whole + cut, torn_tail=True)[1].endswith("\ufffd")
    with pytest.raises(NotUtf8Line) as err:
        split_lines(whole + cut)
    assert err.value.n == 2
    with pytest.raises(NotUtf8Line) as err:
        split_lines(cut + b"\n" + whole, torn_tail=True)
    assert err.value.n == 1
    chunks = [whole[:5], whole[5:] + whole[:12], whole[12:-1] + b"\r\n"]
    assert list(iter_lines(chunks, 100)) == ['{"output": "café"}'] * 2
    with pytest.raises(LongLine) as err:
        list(iter_lines([whole, b"x" * 101], 100))
    assert err.value.n == 2


def test_a_tag_cache_cut_inside_a_character_loses_only_its_last_tags(tmp_path):
    path = tmp_path / "tags.jsonl"
    kept = dumps_line({"key": "a", "tags": ["Café"]}).encode()
    path.write_bytes(kept + dumps_line({"key": "b", "tags": ["Zoë"]}).encode()[:-5])
    with pytest.warns(UserWarning, match="truncated last line"):
        cache = TagCache(path)
    assert len(cache) == 1
    path.write_bytes(b"\xff\n" + kept)
    with pytest.raises(DataFileError, match="line 1: not valid UTF-8"):
        TagCache(path)
