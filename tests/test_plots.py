"""The book's figure style: figures that cannot be read at the column's width are refused."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from longctx import plots  # noqa: E402


def _summary():
    rows = []
    for model in ("reader", "other reader"):
        for query in ("query at end", "query-aware"):
            for pos in (1, 5, 10):
                rows.append(
                    {
                        "model": model,
                        "query": query,
                        "num_pairs": 10,
                        "position": pos,
                        "accuracy": 0.5,
                        "ci_low": 0.4,
                        "ci_high": 0.6,
                    }
                )
    return pd.DataFrame(rows)


def test_book_figures_fit_the_column_with_readable_text():
    fig = plots.accuracy_by_position(
        _summary(), style="query", main="reader", references=(("closed-book", 5.0, ":"),)
    )
    assert fig.get_figwidth() <= plots.COLUMN_INCHES
    assert plots.readability_problems(fig) == []
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    # one entry per reader, per line style and per reference level: not their product
    assert labels == ["reader", "other reader", "query at end", "query-aware", "closed-book"]


def _arms(count: int) -> pd.DataFrame:
    rows = [
        {"arm": f"arm {i}", "num_pairs": 10, "position": pos, "accuracy": 0.5}
        for i in range(count)
        for pos in (1, 5, 10)
    ]
    return pd.DataFrame(rows).assign(ci_low=0.4, ci_high=0.6)


def test_more_lines_than_colours_need_a_palette_and_each_keeps_its_own_style():
    with pytest.raises(ValueError, match="9 lines but 8 Okabe-Ito colours: pass a palette"):
        plots.accuracy_by_position(_arms(9), hue="arm")
    palette = {f"arm {i}": plots.OKABE_ITO[i % 8] for i in range(9)}
    fig = plots.accuracy_by_position(
        _arms(9),
        hue="arm",
        palette=palette,
        hue_styles={"arm 8": {"ls": "--"}, "arm 1": {"marker": "s"}},
    )
    drawn = {line.get_label(): line for line in fig.legends[0].get_lines()}
    assert drawn["arm 8"].get_linestyle() == "--" and drawn["arm 0"].get_linestyle() == "-"
    assert drawn["arm 1"].get_marker() == "s" and drawn["arm 8"].get_marker() == "o"
    lines = fig.axes[0].get_lines()
    assert len([ln for ln in lines if ln.get_linestyle() == "--"]) == 1  # dashed in the panel
    assert len([ln for ln in lines if ln.get_marker() == "s"]) == 1  # and its own marker there
    with pytest.raises(ValueError, match=r"the palette gives no colour to \['arm 8'\]"):
        plots.accuracy_by_position(
            _arms(9),
            hue="arm",
            palette={"arm 0": "black"} | {f"arm {i}": "black" for i in range(8)},
        )


def test_a_figure_too_wide_or_with_small_text_is_refused():
    @plots.book_figure
    def crowded():
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(10, 3))
        ax.set_title("tiny", fontsize=7)
        return fig

    with pytest.raises(ValueError, match=r'crowded drew an unreadable figure: 10.0" wide.*tiny'):
        crowded()


def test_a_condition_not_run_is_marked_not_drawn_as_zero():
    summary = pd.DataFrame(
        [
            {"variant": "a", "condition": "x", "accuracy": 0.5, "ci_low": 0.4, "ci_high": 0.6},
            {"variant": "a", "condition": "y", "accuracy": 0.0, "ci_low": 0.0, "ci_high": 0.1},
            {"variant": "b", "condition": "x", "accuracy": 0.2, "ci_low": 0.1, "ci_high": 0.3},
        ]
    )
    fig = plots.condition_bars(summary, order=["x", "y"], hue="variant", paper={("a", "x"): 70.0})
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("not run") == 1  # b never ran y; a's zero at y is a bar
    assert len(fig.axes[0].patches) == 3


def test_linked_bars_keep_their_title_not_the_last_links_label():
    summary = pd.DataFrame(
        [{"variant": "a", "condition": "x", "accuracy": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 9}]
    )

    def links(bar):
        return "rows.html"

    untitled = plots.condition_bars(summary, order=["x"], hue="variant", links=links)
    assert untitled.axes[0].get_title() == ""
    titled = plots.condition_bars(summary, order=["x"], hue="variant", links=links, title="T")
    assert titled.axes[0].get_title() == "T"
    untitled.axes[0].set_title(untitled.longctx_links[0][-1])
    with pytest.raises(ValueError, match="drawn as the figure's title"):
        plots.image_map(untitled, "fig-x")


def test_factor_names_are_drawn_as_words():
    assert plots._term_label("query_aware") == "query-aware"
    assert plots._term_label("format x query_aware") == "format × query-aware"


def test_a_glued_figure_carries_its_computed_caption_alt_text_and_dpi():
    import base64
    import io
    import re

    import matplotlib.pyplot as plt
    from PIL import Image

    from longctx.plots import DPI, FigureText, figure_directive

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [1, 0])
    text = FigureText(caption="Accuracy, 12 questions per point.", alt="A line\nfalling.")
    md = figure_directive(fig, name="fig-demo", text=text)
    assert md.startswith("```{figure} data:image/png;base64,") and md.rstrip().endswith("```")
    assert ":name: fig-demo\n" in md and ":alt: A line falling.\n" in md
    assert "\n\nAccuracy, 12 questions per point.\n" in md
    png = base64.b64decode(re.search(r"base64,(\S+)", md).group(1))
    with Image.open(io.BytesIO(png)) as img:
        assert round(img.info["dpi"][0]) == DPI
        assert img.mode == "P"  # 256 colours: a third of the bytes of the drawing's RGBA
    assert not plt.fignum_exists(fig.number)  # closed: the page shows only the glued copy


def test_a_linked_point_is_mapped_onto_its_pixels_in_the_saved_image():
    """The image map's circle sits on the point as the cropped PNG shows it: the pixel at
    each area's centre is the point's colour."""
    import base64
    import io
    import re

    import matplotlib.pyplot as plt
    from PIL import Image

    from longctx.plots import FigureText, figure_directive, link_point

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([0, 1], [0, 100], alpha=0)
    for x, y in ((0.2, 30.0), (0.8, 70.0)):
        ax.plot([x], [y], "o", color="#ff0000", ms=10)
        link_point(ax, x, y, f"../downloads/m__kv.html#condition=x%3A%20{x}", f"x {x}")
    ax.set_ylabel("Accuracy (%)")
    text = figure_directive(fig, name="fig-test", text=FigureText("A caption.", "Alt text."))
    uri = re.search(r"data:image/png;base64,(\S+)", text).group(1)
    image = Image.open(io.BytesIO(base64.b64decode(uri))).convert("RGB")
    width = int(re.search(r'data-width="(\d+)"', text).group(1))
    assert abs(width - image.width) <= 1
    areas = re.findall(r'coords="(\d+),(\d+),\d+" href="([^"]+)"', text)
    assert len(areas) == 2 and areas[0][2].endswith("x%3A%200.2")
    for left, top, _ in areas:
        r, g, b = image.getpixel((int(left), int(top)))
        assert r > 200 and g < 80 and b < 80, (left, top, (r, g, b))
    assert "Click a point to open its rows." in text and 'data-figure="fig-test"' in text


def test_a_figure_without_links_has_no_map():
    import matplotlib.pyplot as plt

    from longctx.plots import FigureText, figure_directive

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    text = figure_directive(fig, name="fig-plain", text=FigureText("Caption.", "Alt."))
    assert "<map" not in text and "Click a point" not in text


def test_attention_mass_sums_each_slice_of_the_prompt():
    from longctx.plots import attention_mass

    weights = [0.0] * 9 + [0.5] + [0.1] * 5
    mass = attention_mass(weights, bins=3)
    assert list(mass) == pytest.approx([0.0, 0.5, 0.5]) and mass.sum() == pytest.approx(1.0)
