"""The book checker's link rules, on a tiny HTML tree (the browser part runs in CI's make check-book)."""

import importlib.util
from pathlib import Path

import nbformat

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


def test_external_links_must_be_web_addresses_with_a_host(tmp_path):
    assert check_book.malformed_external("https://arxiv.org/abs/2307.03172") is None
    assert check_book.malformed_external("mailto:someone@example.org") is None
    assert "scheme" in check_book.malformed_external("ftp://example.org/x")
    assert "host" in check_book.malformed_external("https://localhost/x")
    assert "host" in check_book.malformed_external("https://example.org/a b")
    (tmp_path / "index.html").write_text('<a href="http:/example.org">typo</a>')
    assert check_book.broken_links(tmp_path, [tmp_path / "index.html"]) == [
        "index.html: malformed link 'http:/example.org': no host, or spaces in the address"
    ]


def test_a_figure_shrunk_below_the_minimum_text_size_is_reported(tmp_path):
    from PIL import Image

    Image.new("RGB", (750, 300), "white").save(tmp_path / "fits.png", dpi=(100, 100))
    Image.new("RGB", (1300, 300), "white").save(tmp_path / "wide.png", dpi=(100, 100))
    Image.new("RGB", (700, 300), "white").save(tmp_path / "bare.png")
    shown = [
        {"src": "http://127.0.0.1:1/fits.png", "natural": 750, "width": 750},
        {"src": "http://127.0.0.1:1/wide.png", "natural": 1300, "width": 756},
        {"src": "http://127.0.0.1:1/bare.png", "natural": 700, "width": 700},
    ]
    problems = check_book.small_figures(tmp_path, shown)
    # 10 pt at 100 dpi shown at 756/1300 of its size reads 10 * 100/96 * 0.58 = 6.1 pt.
    assert len(problems) == 2
    assert problems[0].startswith("figure wide.png: 1300 px") and "6.1 pt" in problems[0]
    assert "records no DPI" in problems[1]


def test_raw_identifiers_in_table_headers_are_spotted_but_words_are_not():
    for raw in ("ci_low", "mean_ABS", "baseline+qac", "Unnamed: 0", "index"):
        assert check_book.RAW_HEADER.search(raw), raw
    for fine in ("95% CI", "TD+TC (spaCy)", "p (Holm)", "Questions", "query-aware"):
        assert not check_book.RAW_HEADER.search(fine), fine


def test_an_interval_split_across_two_columns_is_spotted():
    for split in ("95% CI low", "95% CI high", "lower", "upper bound"):
        assert check_book.SPLIT_INTERVAL.search(split), split
    for fine in ("change (pts, 95% CI)", "drop rate (%, 95% CI)", "lowest length", "p"):
        assert not check_book.SPLIT_INTERVAL.search(fine), fine


def test_a_table_needs_a_caption_or_a_toggle_of_its_own(tmp_path):
    table = '<table class="longctx-table">{}<tr><th>{}</th></tr></table>'
    (tmp_path / "a.html").write_text(
        "<main><p>Words before are not a caption.</p>"
        + table.format("", "bare")
        + table.format("<caption>What it is.</caption>", "captioned")
        + "<details><summary>The one table here</summary>"
        + table.format("", "toggled")
        + "</details><details><summary>Two tables</summary>"
        + table.format("", "first")
        + table.format("", "second")
        + "</details><details><summary></summary>"
        + table.format("", "empty summary")
        + "</details></main>"
    )
    assert check_book.uncaptioned_tables(tmp_path, [tmp_path / "a.html"]) == [
        f"a.html: a table with no caption ({name})"
        for name in ("bare", "first", "second", "empty summary")
    ]


def test_a_point_label_in_a_figure_title_or_a_map_without_its_figure_is_found(tmp_path):
    label = "masked: 2% (n = 120); open its rows"
    area = f'<area href="x.html#rows=a" title="{label}" alt="{label}">'
    (tmp_path / "a.html").write_text(
        '<main><figure id="fig-a"><img alt="Bar chart." title="' + label + '">'
        "<figcaption>What it shows.</figcaption></figure>"
        f'<map data-figure="fig-a">{area}</map>'
        '<figure id="fig-b"><img alt="Bar chart."><figcaption>Fine.</figcaption></figure>'
        f'<map data-figure="fig-b">{area}</map>'
        f'<map data-figure="fig-gone">{area}</map></main>'
    )
    assert check_book.misplaced_point_labels(tmp_path, [tmp_path / "a.html"]) == [
        "a.html: fig-a's title is one of its points' labels",
        "a.html: a map of points for fig-gone, no such figure",
    ]


def test_a_raw_value_in_a_table_cell_is_found(tmp_path):
    cells = ["12.3%", "None", "none", "nan", "0.0044", "66.2123", "0.00012", "\u22124.1", "n/a"]
    row = "".join(f"<td>{c}</td>" for c in cells)
    (tmp_path / "a.html").write_text(
        f"<main><table><tr><th>arm</th></tr><tr>{row}</tr></table></main>"
    )
    problems = check_book.raw_values(tmp_path, [tmp_path / "a.html"])
    assert [p.split("raw value ")[1].split(" ")[0] for p in problems] == [
        "'None'",
        "'nan'",
        "'66.2123'",
        "'0.00012'",
    ]


def test_a_point_that_opens_a_whole_store_is_found(tmp_path):
    store = "../downloads/m__kv.html"
    (tmp_path / "a.html").write_text(
        "<main><map>"
        f'<area href="{store}#condition=gold_index%3A%200" title="kept">'
        f'<area href="{store}" title="KV middle, 0.5B: reproduced">'
        "</map><table><tr><td>claim A</td>"
        f'<td><a href="{store}#units=r1+r2">rows</a></td>'
        f'<td><a href="{store}">rows</a></td><td><a href="{store}">download</a></td>'
        "</tr></table></main>"
    )
    problems = check_book.unfiltered_points(tmp_path, [tmp_path / "a.html"])
    assert len(problems) == 2
    assert "KV middle, 0.5B" in problems[0] and "claim A" in problems[1]


def test_a_sentence_that_says_a_judged_reader_was_not_run_is_found(tmp_path):
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / "findings-matrix.csv").write_text(
        "claim,reader,status\n"
        "a,qwen2.5-coder-1.5b-instruct,judged\n"
        "a,smollm2-135m-instruct (llamacpp),not run\n"
    )
    (tmp_path / "a.html").write_text(
        "<main><p>The 1.5B is not run here. The 135M was not run on llama.cpp.</p>"
        "<table><tr><td>1.5B: not run</td></tr></table>"
        "<p>Cells not yet run say so.</p></main>"
    )
    problems = check_book.stale_not_run(tmp_path, [tmp_path / "a.html"])
    assert problems == [
        "a.html: says qwen2.5-coder-1.5b-instruct was not run, but it has judged cells: "
        "\u201cThe 1.5B is not run here.\u201d"
    ]


def test_links_that_filter_a_sample_browser_are_collected_not_taken_for_anchors(tmp_path):
    """A claim's rows are linked as <browser>.html#condition=...: the fragment is a filter,
    which check-book opens in Chromium and requires to show rows (empty_filters)."""
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / "m__kv.html").write_text('<span id="count"></span>')
    (tmp_path / "index.html").write_text(
        '<a href="downloads/m__kv.html#condition=gold_index%3A%200%20%7C%7C%20gold_index%3A%2070">'
        "rows</a>"
        '<map name="links-fig"><area shape="circle" coords="10,10,9" '
        'href="downloads/m__kv.html#condition=gold_index%3A%2069" alt="a point" '
        'title="140 pairs, depth 0.5: 41% (n = 165); open its rows"></map>'
    )
    pages = sorted(tmp_path.rglob("*.html"))
    assert check_book.broken_links(tmp_path, pages) == []
    links = check_book.filtered_links(pages)
    assert links == [
        (
            tmp_path / "index.html",
            "downloads/m__kv.html",
            "condition=gold_index%3A%200%20%7C%7C%20gold_index%3A%2070",
            None,
        ),
        (tmp_path / "index.html", "downloads/m__kv.html", "condition=gold_index%3A%2069", 165),
    ]


def test_a_page_that_dumps_its_rows_is_reported_but_a_row_browser_is_not(tmp_path):
    """The class of the C-NORM page that printed every row: a cell printing more lines than
    the limit, a page heavier or taller than the limits; the row browsers are data pages."""
    limit = check_book.MAX_OUTPUT_LINES
    dump = "\n".join(f"{{'row': {i}}}" for i in range(limit + 1))
    fine = "\n".join(["a line"] * limit)
    cell = '<div class="cell_output"><pre>{}</pre></div>'
    (tmp_path / "downloads").mkdir()
    (tmp_path / "chapter.html").write_text(f"<main>{cell.format(dump)}{cell.format(fine)}</main>")
    (tmp_path / "heavy.html").write_text("<main>" + "x" * (check_book.MAX_PAGE_BYTES + 1))
    (tmp_path / "downloads" / "rows.html").write_text(cell.format(dump) + "x" * 2_000_000)
    pages = [tmp_path / "chapter.html", tmp_path / "heavy.html", tmp_path / "downloads/rows.html"]
    problems = check_book.oversized_pages(tmp_path, pages)
    assert len(problems) == 2
    assert problems[0].startswith(f"chapter.html: a cell prints {limit + 1} lines")
    assert problems[1].startswith("heavy.html: the page's HTML is 1.5 MB")
    tall = check_book.MAX_PAGE_HEIGHT_PX + 1
    assert check_book.too_tall(tall, "http://h/notebooks/cnorm.html")
    assert not check_book.too_tall(tall, "http://h/downloads/rows.html")
    assert not check_book.too_tall(check_book.MAX_PAGE_HEIGHT_PX, "http://h/index.html")


def test_a_number_typed_in_a_figure_caption_or_alt_text_is_reported():
    import nbformat

    nb = nbformat.v4.new_notebook()
    typed = nbformat.v4.new_code_cell("chapter.figure(view)")
    typed.metadata["mystnb"] = {
        "figure": {"caption": "Accuracy, 150 questions per point.", "name": "fig-new"},
        "image": {"alt": "A line."},
    }
    words = nbformat.v4.new_code_cell("chapter.figure(view)")
    words.metadata["mystnb"] = {
        "figure": {"caption": "Accuracy per point.", "name": "fig-words"},
        "image": {"alt": "A line falling to a third of its start."},
    }
    nb.cells = [typed, words]
    problems = check_book.typed_figure_numbers(nb)
    assert len(problems) == 1 and problems[0].startswith("figure fig-new:")


def test_an_inline_figure_reports_its_dpi(tmp_path):
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (20, 10), "white").save(buffer, format="png", dpi=(100, 100))
    uri = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    assert round(check_book.image_dpi(tmp_path, uri)) == 100


def test_a_result_typed_in_prose_fails_unless_glued_the_papers_or_a_convention():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            "Our accuracy fell to 37.5% ({glue:text}`kv-drop` points) with a 95% interval of "
            "±10 points; the paper's 45.6% (Figure 7.1, Qwen2.5-1.5B, section 4.2) and p = .136."
        ),
        nbformat.v4.new_code_cell("x = 12.5  # code is not prose"),
    ]
    problems = check_book.typed_prose_numbers(nb, {45.6, 0.136})
    assert len(problems) == 1 and "types 37.5%" in problems[0]
    # A number derived from the paper's (here +9.5 = 94.9 - 85.4) is not the paper's own.
    nb.cells = [nbformat.v4.new_markdown_cell("The paper's gain, +9.5 points, and 94.9%.")]
    assert ["+9.5" in p for p in check_book.typed_prose_numbers(nb, {94.9, 85.4})] == [True]


def test_the_chapters_prose_types_no_result_of_its_own():
    """The same check the built book gets, on the notebooks' sources: every result-like
    number of a chapter's prose is glued or is one the paper gives."""
    import jupytext

    root = Path(__file__).resolve().parents[1]
    problems = [
        f"{path.stem}: {p}"
        for path in sorted((root / "notebooks").glob("*.py"))
        for p in check_book.typed_prose_numbers(
            jupytext.read(path), check_book.paper_numbers(path.stem)
        )
    ]
    assert not problems, problems
    assert check_book.paper_numbers("kv_retrieval") >= {45.6}


def test_tables_that_hide_columns_and_text_past_the_column_are_reported():
    problems = check_book.too_wide(["Speed by backend"], ["'**\\n```", "'**\\n```"])
    assert len(problems) == 2
    assert "hides columns" in problems[0] and "Speed by backend" in problems[0]
    assert problems[1].startswith("text runs past the column")
    assert check_book.too_wide([], []) == []


def test_a_number_glued_two_ways_on_two_pages_is_found():
    values = {
        "backends": {"speed-ratio": "0.96", "rows": "160"},
        "running": {"speed-ratio": "2.0"},
        "crossing": {"speed-ratio": "0.96", "other": "1"},
    }
    assert check_book.glued_differently(values) == [
        "speed-ratio is glued as '0.96' and as '2.0' on backends, running, crossing"
    ]
    nb = nbformat.v4.new_notebook()
    out = nbformat.v4.new_output(
        "display_data", data={"text/plain": "'0.96'"}, metadata={"scrapbook": {"name": "k"}}
    )
    nb.cells.append(nbformat.v4.new_code_cell("glue('k', '0.96')", outputs=[out]))
    assert check_book.glued_values(nb) == {"k": "'0.96'"}
