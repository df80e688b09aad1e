"""Rows survive every character: U+2028, U+2029 and U+0085 through append, read, pack, merge
and replay (str.splitlines splits at each of them)."""

import json
import lzma

import pytest

from longctx.jsonl import dumps_line, iter_text_lines, split_lines
from longctx.store import ResultsStore

BREAKERS = ["\u2028", "\u2029", "\u0085"]


@pytest.mark.parametrize("char", BREAKERS)
def test_a_line_breaker_is_escaped_on_write_and_the_line_reads_back(char):
    line = dumps_line({"key": "k", "output": f"a{char}b"})
    assert char not in line and line.count("\n") == 1
    assert split_lines(line + line) == [line[:-1], line[:-1]]


def test_lines_split_at_newline_only_even_when_written_raw():
    raw = '{"key": "k", "output": "a\u2028b"}\n{"key": "j"}\r\n'
    assert split_lines(raw) == ['{"key": "k", "output": "a\u2028b"}', '{"key": "j"}']
    chunks = ['data: {"t": "a\u2028', 'b"}\n\nda', "ta: [DONE]\n"]
    assert list(iter_text_lines(chunks)) == ['data: {"t": "a\u2028b"}', "", "data: [DONE]"]


@pytest.mark.parametrize("char", BREAKERS)
def test_a_row_holding_a_line_breaker_survives_append_pack_and_merge(tmp_path, char):
    rows = [{"key": f"k{i}", "output": f"a{char}b{i}", "prompt": f"p{char}"} for i in range(3)]
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
