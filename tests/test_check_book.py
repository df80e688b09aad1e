"""The book checker's link rules, on a tiny HTML tree (the browser part runs in CI's make check-book)."""

import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "check_book", Path(__file__).resolve().parents[1] / "scripts" / "check_book.py"
)
check_book = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(check_book)


def test_internal_links_need_their_file_and_anchor(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="notebooks/a.html#sec">ok</a> <a href="notebooks/b.html">gone</a>'
        '<a href="https://example.org/x">external</a><a href="#top">self</a>'
        '<h1 id="top">t</h1>'
    )
    (tmp_path / "notebooks" / "a.html").write_text(
        '<section id="sec"></section><a href="../index.html#nope">x</a>'
    )
    pages = sorted(tmp_path.rglob("*.html"))
    problems = check_book.broken_links(tmp_path, pages)
    assert problems == [
        "index.html: link to missing notebooks/b.html",
        "notebooks/a.html: link to missing anchor ../index.html#nope",
    ]


def test_raw_tex_is_spotted_but_prose_dollars_are_not():
    assert check_book.RAW_TEX.search(r"the formula \(x^2\) is raw")
    assert check_book.RAW_TEX.search("$$x$$")
    assert not check_book.RAW_TEX.search("It costs $5 and $6.")


def test_statement_count_is_read_from_the_check_cell_output():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("print(...)")]
    assert check_book.checks_in_notebook(nb) is None
    nb.cells[1].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="claims checked: 0\n")
    ]
    assert check_book.checks_in_notebook(nb) == 0
    nb.cells[1].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="claims checked: 13\n")
    ]
    assert check_book.checks_in_notebook(nb) == 13


def test_a_glue_key_quoted_but_never_glued_is_reported():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            "At {glue:text}`kv-a` pairs, {glue:text}`kv-b:.1f` points; {glue}`kv-fig`."
        ),
        nbformat.v4.new_code_cell("glue_all(...)"),
    ]
    nb.cells[1].outputs = [
        nbformat.v4.new_output(
            "display_data", data={"text/plain": "1"}, metadata={"scrapbook": {"name": "kv-a"}}
        )
    ]
    assert check_book.missing_glue_keys(nb) == ["kv-b", "kv-fig"]
    nb.cells[1].outputs.append(
        nbformat.v4.new_output(
            "display_data", data={"text/plain": "2"}, metadata={"scrapbook": {"name": "kv-b"}}
        )
    )
    assert check_book.missing_glue_keys(nb) == ["kv-fig"]
