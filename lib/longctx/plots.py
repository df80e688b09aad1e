"""Figures shared by the chapters, in one style.

Every figure the book shows is drawn by a function wrapped in :func:`book_figure`: it draws
under :data:`STYLE` (Okabe-Ito colours, fonts of at least :data:`MIN_FONT_PT`) at most
:data:`COLUMN_INCHES` wide, the width of the book's text column at :data:`DPI`, so a figure
is shown at its own size, never shrunk; and it fails, rather than ships, a figure with
smaller text. One line-style convention holds across chapters: solid for the paper's own
setting, dashed for the manipulation, grey dotted or dash-dot for reference levels
(closed-book, oracle, a paper's worst case, half retention), and open black diamonds on a
thin dotted line for the paper's reported numbers. The reader a page is about is drawn
thick with its 95% band; other readers and backends thin, without bands.
"""

from __future__ import annotations

import base64
import functools
import html
import io
from dataclasses import dataclass

import numpy as np
import pandas as pd
from PIL import Image

from .claims import STABLE
from .report import tokens_text

# Okabe & Ito (2008): told apart with every common colour-vision deficiency; yellow last
# because it is faint on white.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000", "#F0E442"]
COLUMN_INCHES = 7.4  # the figure column at 1400 px is 756 CSS px; the saved margin adds 0.1 in
DPI = 100
MIN_FONT_PT = 10.0
PAPER_STYLE = {"color": "black", "ls": ":", "lw": 1.2, "marker": "D", "mfc": "white", "ms": 6}
PAPER_MARKERS = ("D", "s", "^", "v")  # one open marker per paper model where a figure marks several
REFERENCE_STYLE = {"color": "0.45", "lw": 1.2}
MAIN_LW, OTHER_LW = 2.2, 1.1
LINESTYLES = ["-", "--", "-.", ":"]


def _style() -> dict:
    from cycler import cycler

    return {
        "figure.dpi": DPI,
        "savefig.dpi": DPI,
        "font.size": 11,
        "axes.titlesize": 11,
        "axes.labelsize": 11,
        "xtick.labelsize": 10,
        "ytick.labelsize": 10,
        "legend.fontsize": 10,
        "figure.titlesize": 11,
        "axes.prop_cycle": cycler(color=OKABE_ITO),
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "legend.frameon": False,
        "lines.linewidth": MAIN_LW,
    }


@dataclass(frozen=True)
class FigureText:
    """A figure's caption and alt text, computed from the numbers it draws (never typed:
    ``scripts/check_book.py`` refuses a digit in a notebook's figure metadata)."""

    caption: str
    alt: str


LINK_RADIUS_PX = 9  # of a point's clickable circle, in the saved image's pixels


def link_point(ax, x: float, y: float, href: str | None, title: str) -> None:
    """Make the point at data ``(x, y)`` of ``ax`` one click from ``href`` (its rows): the
    figure remembers it, and :func:`figure_directive` writes it as an area of the image's
    map (``book/_static/figure_links.js`` fits the map to the image's shown size)."""
    if href:
        ax.figure.__dict__.setdefault("longctx_links", []).append((ax, x, y, href, title))


def image_map(fig, name: str) -> str:
    """The HTML map of ``fig``'s linked points (:func:`link_point`), in the pixels of the
    image :func:`figure_directive` saves (the book's DPI, cropped as ``bbox_inches="tight"``
    crops, with its 0.1-inch pad); empty when no point is linked."""
    links = fig.__dict__.get("longctx_links")
    if not links:
        return ""
    labels = {title for *_, title in links}
    drawn_as_title = [ax.get_title() for ax in fig.axes if ax.get_title() in labels]
    if drawn_as_title:
        raise ValueError(f"a point's label is drawn as the figure's title: {drawn_as_title[0]!r}")
    fig.canvas.draw()
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.1)
    areas = []
    for ax, x, y, href, title in links:
        px, py = ax.transData.transform((x, y))
        left = (px / fig.dpi - box.x0) * DPI
        top = (box.y1 - py / fig.dpi) * DPI
        areas.append(
            f'<area shape="circle" coords="{left:.0f},{top:.0f},{LINK_RADIUS_PX}" '
            f'href="{html.escape(href)}" alt="{html.escape(title)}" title="{html.escape(title)}">'
        )
    width = round(box.width * DPI)
    return (
        f'<map name="links-{name}" data-figure="{name}" data-width="{width}">\n'
        + "\n".join(areas)
        + "\n</map>\n"
    )


def compact_png(png: bytes) -> bytes:
    """``png`` in 256 colours: a plot's flat colours and anti-aliased edges come through
    unseen at about a third of the bytes, which matters where a page holds several figures
    inline. A figure with transparency is kept as drawn."""
    image = Image.open(io.BytesIO(png))
    if image.mode == "RGBA" and image.getextrema()[3][0] < 255:
        return png
    out = io.BytesIO()
    palette = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
    palette.save(out, format="PNG", optimize=True, dpi=(DPI, DPI))
    return out.getvalue()


def figure_directive(fig, *, name: str, text: FigureText) -> str:
    """The MyST figure directive for ``fig``: its PNG inline (the book's DPI, cropped to its
    drawing as the notebook's inline backend crops), with ``text``'s alt text and caption,
    labelled ``name`` for ``{numref}``. The page glues it as Markdown, so caption and alt
    text come from the same numbers as the prose."""
    import matplotlib.pyplot as plt

    links = image_map(fig, name)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    uri = "data:image/png;base64," + base64.b64encode(compact_png(buffer.getvalue())).decode()
    alt = " ".join(text.alt.split())
    caption = text.caption.strip()
    if links:
        caption += " Click a point to open its rows."
    figure = f"```{{figure}} {uri}\n:name: {name}\n:alt: {alt}\n\n{caption}\n```\n"
    return figure + (f"\n{links}" if links else "")


def readability_problems(fig) -> list[str]:
    """What keeps ``fig`` from being read at the book's width: wider than the column, or
    any visible text smaller than :data:`MIN_FONT_PT`."""
    from matplotlib.text import Text

    problems = []
    if fig.get_figwidth() > COLUMN_INCHES + 1e-6:
        problems.append(
            f'{fig.get_figwidth():.1f}" wide; the column holds {COLUMN_INCHES}" at {DPI} dpi'
        )
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text().strip() and text.get_fontsize() < MIN_FONT_PT:
            problems.append(f"text {text.get_text()[:40]!r} at {text.get_fontsize():g} pt")
    return problems


def book_figure(draw):
    """Draw ``draw``'s figure in the book's style and refuse one that cannot be read at the
    column's width (a ``ValueError`` naming each problem)."""

    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        import matplotlib.pyplot as plt

        with plt.rc_context(_style()):
            fig = draw(*args, **kwargs)
        if fig is not None and (problems := readability_problems(fig)):
            raise ValueError(f"{draw.__name__} drew an unreadable figure: " + "; ".join(problems))
        return fig

    return drawn


def _panels(count: int, height: float):
    """A row of ``count`` panels sharing their y axis, the column's width in all."""
    import matplotlib.pyplot as plt

    return plt.subplots(
        1, count, figsize=(COLUMN_INCHES, height), squeeze=False, sharey=True, layout="constrained"
    )


def _legend_below(fig, handles, *, ncol: int = 2) -> None:
    """The legend under the panels, inside the figure's width (constrained layout)."""
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=min(ncol, len(handles)))


def _line_handles(hues: list, colours: dict, thick: dict, styles: dict | None = None) -> list:
    """Legend entries of the hues' lines, drawn as :func:`_draw_line` draws them, each in its
    hue's own line style and marker where ``styles`` gives them (none for a single hue)."""
    from matplotlib.lines import Line2D

    styles = styles or {}
    return [
        Line2D(
            [],
            [],
            color=colours[h],
            ls=styles.get(h, {}).get("ls", "-"),
            lw=MAIN_LW if thick[h] else OTHER_LW,
            marker=styles.get(h, {}).get("marker", "o"),
            ms=5 if thick[h] else 8,
            mfc=colours[h] if thick[h] else "white",
            label=str(h),
        )
        for h in (hues if len(hues) > 1 else [])
    ]


def _link_line(ax, line, x: str, links, where: str) -> None:
    """Each point of one drawn line one click from its rows (:func:`link_point`)."""
    for row in line.to_dict("records"):
        link_point(
            ax,
            row[x],
            100 * row["accuracy"],
            links(row),
            f"{where}, {x} {row[x]:g}: {100 * row['accuracy']:.0f}% (n = {row['n']}); "
            "open its rows",
        )


def _draw_line(ax, line, x: str, *, colour, ls: str, main: bool, marker: str = "o"):
    """One condition's points: a line with a 95% band for the main reader, a thin line for
    the others; fewer than three points are drawn as points with whiskers, not a line a
    reader would take for a trend."""
    line = line.sort_values(x)
    xs, ys = line[x].to_numpy(), 100 * line["accuracy"].to_numpy()
    lo, hi = 100 * line["ci_low"].to_numpy(), 100 * line["ci_high"].to_numpy()
    lw = MAIN_LW if main else OTHER_LW
    if len(line) < 3:
        ax.errorbar(
            xs,
            ys,
            yerr=[ys - lo, hi - ys],
            fmt=marker if main else ".",
            color=colour,
            capsize=3,
            lw=lw,
            alpha=1 if main else 0.8,
        )
        return
    # The page's reader on top, filled; the others beneath as open rings a size larger, so
    # where they coincide with it each still shows around its point.
    ax.plot(
        xs,
        ys,
        ls,
        marker=marker,
        ms=5 if main else 8,
        mfc=colour if main else "white",
        color=colour,
        lw=lw,
        zorder=5 if main else 3,
        alpha=1 if main else 0.9,
    )
    if main:
        ax.fill_between(xs, lo, hi, color=colour, alpha=0.15, lw=0)


def _paper_marks(ax, part: pd.DataFrame, *, x: str, hue: str, colours: dict) -> None:
    """The paper's numbers in one panel: open diamonds on a dotted line, one per ``hue``
    where they differ by it, in that hue's colour."""
    groups = part.groupby(hue) if hue in part else [(None, part)]
    for h, line in groups:
        line = line.sort_values(x)
        colour = colours.get(h, "black")
        ax.plot(
            line[x],
            100 * line["accuracy"],
            **{**PAPER_STYLE, "mec": colour, "color": colour},
            zorder=4,
        )


def _marks_handles(styles: dict, paper_label: str | None, references: tuple) -> list:
    """Legend entries after the hues': each line style (``styles``: name -> dashes), the
    paper's marks where ``paper_label`` names them, and each reference level."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color="0.25", ls=ls, lw=1.6, label=str(s)) for s, ls in styles.items()
    ]
    if paper_label is not None:
        handles.append(Line2D([], [], **PAPER_STYLE, label=paper_label))
    return handles + [
        Line2D([], [], ls=ls, **REFERENCE_STYLE, label=label) for label, _, ls in references
    ]


def _hue_colours(hues: list, palette: dict | None) -> dict:
    """Each hue's colour: ``palette``'s, else the Okabe-Ito colours in order; more hues than
    those colours without a palette would repeat one, so they are refused."""
    if palette is not None:
        missing = [h for h in hues if h not in palette]
        if missing:
            raise ValueError(f"the palette gives no colour to {missing}")
        return {h: palette[h] for h in hues}
    if len(hues) > len(OKABE_ITO):
        raise ValueError(
            f"{len(hues)} lines but {len(OKABE_ITO)} Okabe-Ito colours: pass a palette"
        )
    return dict(zip(hues, OKABE_ITO))


def accuracy_by_position(
    summary,
    *,
    x: str = "position",
    facet: str = "num_pairs",
    hue: str = "model",
    style: str | None = None,
    style_order: list | None = None,
    hue_order: list | None = None,
    facet_title: str = "{} pairs",
    xlabel: str = "Position of gold item",
    ylabel: str = "Accuracy (%)",
    title: str | None = None,
    xlim: tuple | None = None,
    main=None,
    paper: pd.DataFrame | None = None,
    paper_label: str = "paper",
    references: tuple = (),
    height: float = 3.3,
    links=None,
    palette: dict | None = None,
    hue_styles: dict | None = None,
):
    """Accuracy (shares, drawn in %) against ``x``: one panel per ``facet`` value, one colour
    per ``hue`` (in ``hue_order``, else sorted), one line style per ``style`` (the first of
    ``style_order`` solid: the paper's setting). ``main`` names the hue (the page's reader)
    drawn thick with its band, the others thin; without it every hue is drawn thick
    (conditions, not readers).
    ``paper`` holds the paper's numbers (``facet``, ``x``, ``accuracy`` as a share, and
    ``hue`` where they differ by it), drawn as open diamonds; ``references`` are
    ``(label, level in %, line style)`` grey levels drawn in every panel. ``links(row)``: a
    point's rows (:func:`link_point`). ``palette`` maps each hue to its colour (needed beyond
    the eight Okabe-Ito colours); ``hue_styles`` gives a hue its own ``ls`` and ``marker``
    (so no line rests on colour alone), which the legend shows."""

    facets = sorted(summary[facet].unique())
    present_hues = set(summary[hue])
    hues = [h for h in hue_order if h in present_hues] if hue_order else sorted(present_hues)
    if main in hues:  # one reader among others: it first, thick; the rest thin
        hues = [main] + [h for h in hues if h != main]
    thick = {h: main not in hues or h == main for h in hues}
    colours = _hue_colours(hues, palette)
    present = set(summary[style]) if style else {None}
    styles = [s for s in (style_order or sorted(present, key=str)) if s in present]
    dashes = dict(zip(styles, LINESTYLES))
    fig, axes = _panels(len(facets), height)
    for ax, value in zip(axes[0], facets):
        panel = summary[summary[facet] == value]
        for h in hues:  # the page's reader drawn on top of the others (see _draw_line)
            for s in styles:
                line = panel[(panel[hue] == h) & ((panel[style] == s) if style else True)]
                if len(line):
                    own = {"ls": dashes[s], "marker": "o", **(hue_styles or {}).get(h, {})}
                    _draw_line(ax, line, x, colour=colours[h], main=thick[h], **own)
                if links:
                    where = " · ".join(str(v) for v in (h, facet_title.format(value), s) if v)
                    _link_line(ax, line, x, links, where)
        if paper is not None:
            part = paper[paper[facet] == value] if facet in paper else paper
            _paper_marks(ax, part, x=x, hue=hue, colours=colours)
        for _, level, ls in references:
            ax.axhline(level, ls=ls, **REFERENCE_STYLE)
        ax.set_title(facet_title.format(value))
        ax.set_ylim(-2, 102)
        xs = sorted(panel[x].unique())
        if len(xs) <= 7:  # few positions: tick exactly those
            ax.set_xticks(xs, [f"{v:g}" for v in xs])
        if xlim:
            ax.set_xlim(*xlim)
    axes[0][len(facets) // 2].set_xlabel(xlabel)  # once, under the middle panel
    axes[0][0].set_ylabel(ylabel)
    handles = _line_handles(hues, colours, thick, hue_styles) + _marks_handles(
        {s: dashes[s] for s in styles} if len(styles) > 1 else {},
        paper_label if paper is not None and len(paper) else None,
        references,
    )
    _legend_below(fig, handles)
    if title:
        fig.suptitle(title)
    return fig


@book_figure
def retention_curves(
    curve,
    *,
    h: str = "num_hard",
    facet: str = "metric",
    hue: str = "retriever",
    threshold: float = 0.5,
    title: str | None = None,
    paper: pd.DataFrame | None = None,
    paper_label: str = "paper",
    links=None,
):
    """Retention R(H) vs H, one panel per ``facet`` value (e.g. EM, F1), one line per ``hue``,
    with each row's ``R_low``..``R_high`` band and the half-retention line; ``paper`` rows
    (``facet``, ``hue``, ``h``, ``R``) are drawn as open diamonds in the hue's colour.
    ``links(point)`` gives the address of a point's rows (:func:`link_point`)."""
    from matplotlib.lines import Line2D

    facets = list(dict.fromkeys(curve[facet]))
    fig, axes = _panels(len(facets), 3.4)
    names = sorted(curve[hue].unique())
    colours = dict(zip(names, OKABE_ITO))
    for ax, value in zip(axes[0], facets):
        for name, line in curve[curve[facet] == value].groupby(hue):
            line = line.sort_values(h)
            ax.plot(line[h], line["R"], marker="o", color=colours[name], lw=MAIN_LW)
            for point in line.to_dict("records") if links else ():
                link_point(
                    ax,
                    point[h],
                    point["R"],
                    links(point),
                    f"{name} · {value}, H = {point[h]}: R = {point['R']:.2f} "
                    f"(n = {point['questions']}); open its rows",
                )
            ax.fill_between(
                line[h], line["R_low"], line["R_high"], color=colours[name], alpha=0.15, lw=0
            )
        if paper is not None:
            for name, part in paper[paper[facet] == value].groupby(hue):
                ax.plot(
                    part[h],
                    part["R"],
                    **{**PAPER_STYLE, "ls": "none", "mec": colours.get(name, "black")},
                    zorder=4,
                )
        ax.axhline(threshold, ls="--", **REFERENCE_STYLE)
        ax.set_title(str(value))
        ax.set_xlabel("Hard negatives H")
        ax.set_xticks(sorted(curve[h].unique()))
    axes[0][0].set_ylabel("Retention R(H) = M(H) / M(0)")
    axes[0][0].set_ylim(bottom=0)
    handles = [Line2D([], [], color=colours[n], lw=MAIN_LW, marker="o", label=n) for n in names]
    if paper is not None and len(paper):
        handles.append(Line2D([], [], **{**PAPER_STYLE, "ls": "none"}, label=paper_label))
    handles.append(Line2D([], [], ls="--", **REFERENCE_STYLE, label="half retention"))
    _legend_below(fig, handles, ncol=4)
    if title:
        fig.suptitle(title)
    return fig


VERDICT_COLOURS = {  # Okabe-Ito: told apart with any colour vision
    "reproduced": "#009E73",
    "opposite direction": "#D55E00",
    "not reproduced": "#E69F00",
    "inconclusive at this n": "#999999",
    "premise not met": "#56B4E9",
    "premise not measured": "#CC79A7",
}


@book_figure
def forest(table, *, title: str | None = None):
    """One row per claim: our difference with its 95% interval (coloured by verdict) and the
    paper's effect as a diamond where it reports one (``paper_effect`` column, optional)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    rows = table.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(COLUMN_INCHES, 0.4 * len(rows) + 2.0), layout="constrained")
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows.itertuples()):
        colour = VERDICT_COLOURS.get(r.verdict, "black")
        ax.plot([r.ci_low, r.ci_high], [y, y], color=colour, lw=2.4)
        ax.plot(r.difference, y, "o", color=colour)
        effect = getattr(r, "paper_effect", None)
        if effect is not None and effect == effect:
            ax.plot(effect, y, **{**PAPER_STYLE, "ls": "none"})
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels(
        [getattr(r, "short", None) or f"{r.paper}: {r.comparison}" for r in rows.itertuples()]
    )
    ax.set_xlabel("Difference (points)")
    ax.grid(axis="y", visible=False)
    handles = [
        Line2D([], [], color=c, lw=2.4, marker="o", label=v) for v, c in VERDICT_COLOURS.items()
    ]
    handles.append(Line2D([], [], **{**PAPER_STYLE, "ls": "none"}, label="paper's effect"))
    fig.legend(handles=handles, loc="outside upper center", ncol=3)
    if title:
        ax.set_title(title)
    return fig


VERDICT_MARKERS = {  # shape as well as colour, so a mark reads in grey too
    "reproduced": "o",
    "opposite direction": "X",
    "not reproduced": "s",
    "inconclusive at this n": "d",
    "premise not met": "o",
    "premise not measured": "P",
}
GRID_MARKS = {  # the signs beside a verdict's mark: sign -> (colour, legend)
    "‡": ("0.3", "rule fixed after the rows"),
    "≈": ("0.2", f"fragile: holds in < {STABLE:.0%}"),
    "⇄": ("#D55E00", "backends disagree"),
}


EFFECT_PANELS = (  # (panel, x-axis label): claims with a paper's effect, then those without
    ("ratio", "Ours ÷ the paper's effect (1: the paper's)"),
    ("points", "Ours in points, the paper's direction positive"),
)
RATIO_LIMITS = (-3.0, 5.0)  # a multiple beyond these is drawn at the edge, with an arrow


@book_figure
def effects_grid(cells, *, readers: list[str]):
    """Every judged cell as its interval, one row per claim and the readers dodged within it
    (colour: the reader; shape: the verdict, open where the premise is not met, faded where
    fragile, ``‡``/``⇄`` as in the tables). ``cells`` has ``short``, ``reader``, ``status``,
    ``verdict``, ``panel`` (``ratio``: ``x``, ``x_low``, ``x_high`` are ours over the paper's
    effect; ``points``: signed points) and optional ``href``, ``label`` (the row's name)."""
    import matplotlib.pyplot as plt

    judged = cells[(cells["status"] == "judged") & cells["x"].notna()]
    panels = [(k, words) for k, words in EFFECT_PANELS if (judged["panel"] == k).any()]
    rows = {k: list(dict.fromkeys(judged[judged["panel"] == k]["label"])) for k, _ in panels}
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(COLUMN_INCHES, 0.42 * sum(map(len, rows.values())) + 1.3 * len(panels) + 1.2),
        height_ratios=[len(rows[k]) + 1.5 for k, _ in panels],
        layout="constrained",
        squeeze=False,
    )
    colours = dict(zip(readers, OKABE_ITO))
    for ax, (panel, words) in zip(axes[:, 0], panels):
        names = rows[panel]
        ys = {name: len(names) - 1 - k for k, name in enumerate(names)}
        for name, margin in (
            judged[judged["panel"] == panel].groupby("label")["margin"].first().items()
        ):
            if margin == margin and margin is not None:  # a claim of no effect: its margin
                ax.fill_betweenx(
                    [ys[name] - 0.45, ys[name] + 0.45], -margin, margin, color="0.9", zorder=0
                )
        for r in judged[judged["panel"] == panel].itertuples():
            slot = readers.index(r.reader)
            y = ys[r.label] + 0.22 * ((len(readers) - 1) / 2 - slot)
            _effect_mark(
                ax, r, y, colours[r.reader], clip=RATIO_LIMITS if panel == "ratio" else None
            )
        ax.axvline(0, color="0.5", lw=1)
        if panel == "ratio":
            ax.axvline(1, **{**PAPER_STYLE, "marker": None}, label="the paper's effect")
            # room right of the edge for the signs beside a mark drawn there
            ax.set_xlim(RATIO_LIMITS[0] - 0.3, RATIO_LIMITS[1] + 0.9)
        ax.set_yticks(list(ys.values()), list(ys))
        ax.set_ylim(-0.6, len(names) - 0.4)
        for y in ys.values():
            ax.axhline(y + 0.5, color="0.9", lw=0.8, zorder=0)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(words)
    _legend_below(fig, _effect_handles(readers, colours), ncol=3)
    return fig


def _effect_mark(ax, r, y: float, colour: str, clip: tuple[float, float] | None) -> None:
    """One judged cell of :func:`effects_grid`: its interval, its verdict's mark at the
    estimate (at the edge, with an arrow, where ``clip`` cuts it) and its signs and link."""
    x, lo, hi = r.x, r.x_low, r.x_high
    if clip:
        lo, hi = (min(max(v, clip[0]), clip[1]) for v in (lo, hi))
        for end, cut, arrow in ((r.x_low, clip[0], "<"), (r.x_high, clip[1], ">")):
            if (end < cut) if arrow == "<" else (end > cut):
                ax.plot(cut, y, marker=arrow, ms=5, color=colour, ls="none")
        x = min(max(x, clip[0]), clip[1])
    fragile = bool(getattr(r, "fragile", False))
    alpha = 0.4 if fragile else 1.0
    ax.plot([lo, hi], [y, y], color=colour, lw=2, alpha=alpha, solid_capstyle="butt")
    hollow = r.verdict == "premise not met"
    ax.plot(
        x,
        y,
        VERDICT_MARKERS[r.verdict],
        ms=7,
        color=colour,
        mfc="white" if hollow else colour,
        mew=1.6,
        alpha=alpha,
        ls="none",
    )
    signs = [
        ("≈", fragile),
        ("⇄", bool(getattr(r, "backend_sensitive", False))),
        ("‡", r.preregistered is False),
    ]
    shown = "".join(sign for sign, on in signs if on)
    if shown:
        ax.text(hi, y, " " + shown, va="center", ha="left", fontsize=10, color="0.25")
    if isinstance(getattr(r, "href", None), str):
        link_point(ax, x, y, r.href, f"{r.label}, {r.reader}: {r.verdict}; open its rows")


def _effect_handles(readers: list[str], colours: dict) -> list:
    """:func:`effects_grid`'s legend: the readers' colours, the verdicts' shapes, the signs."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Line2D([], [], color=colours[r], lw=2, label=r.replace("\n", " ")) for r in readers]
    handles += [
        Line2D(
            [],
            [],
            ls="none",
            marker=VERDICT_MARKERS[v],
            ms=7,
            mew=1.6,
            color="0.3",
            mfc="white" if v == "premise not met" else "0.3",
            label=v,
        )
        for v in VERDICT_COLOURS
    ]
    handles.append(Line2D([], [], **{**PAPER_STYLE, "marker": None}, label="the paper's effect"))
    handles.append(Patch(color="0.9", label="no-effect margin"))
    handles += [
        Line2D([], [], ls="none", marker=f"${sign}$", ms=9, color=colour, label=label)
        for sign, (colour, label) in GRID_MARKS.items()
    ]
    return handles


@book_figure
def condition_bars(
    summary,
    *,
    order,
    hue: str,
    value: str = "accuracy",
    xlabel: str = "Accuracy (%)",
    title: str | None = None,
    paper: dict | None = None,
    paper_label: str = "paper",
    papers: dict[str, dict] | None = None,
    links=None,
):
    """Horizontal bars of ``value`` per condition (in ``order``), grouped by ``hue``, with
    each row's ``ci_low``..``ci_high`` as a whisker (values are shares, drawn in %). A
    condition a hue did not run is marked "not run", never drawn as a zero. ``paper`` maps
    ``(hue, condition)`` to the paper's number in %, drawn as an open diamond; ``papers``
    holds one such map per paper model (label -> map), each with its own open marker.
    ``links(bar)`` gives the address of a bar's rows (its ``hue`` and ``condition``) or None:
    the bar's end becomes one click from them (:func:`link_point`)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    hues = list(dict.fromkeys(summary[hue]))
    colours = dict(zip(hues, OKABE_ITO))
    conditions = [c for c in order if c in set(summary["condition"])]
    fig, ax = plt.subplots(
        figsize=(COLUMN_INCHES, 0.45 * len(conditions) * max(1, len(hues)) ** 0.5 + 1.6),
        layout="constrained",
    )
    height = 0.8 / len(hues)
    marks = [*([(paper_label, paper)] if paper else []), *(papers or {}).items()]
    styles = [{**PAPER_STYLE, "ls": "none", "marker": m} for m in PAPER_MARKERS]
    for k, h in enumerate(hues):
        part = summary[summary[hue] == h].set_index("condition")
        for i, c in enumerate(conditions):
            y = len(conditions) - 1 - i + (len(hues) - 1 - k - (len(hues) - 1) / 2) * height
            if c not in part.index:
                ax.text(1, y, "not run", va="center", color="0.35", style="italic")
                continue
            v, lo, hi = (100 * part.loc[c, col] for col in (value, "ci_low", "ci_high"))
            ax.barh(y, v, height=height * 0.9, color=colours[h])
            ax.errorbar(
                v, y, xerr=[[v - lo], [hi - v]], fmt="none", ecolor="black", capsize=2, lw=1
            )
            # The value right of its whisker and of any paper mark on the row, never on them.
            marked = [cells[h, c] for _, cells in marks if (h, c) in cells]
            ax.text(min(max([hi, *marked]) + 2.5, 101), y, f"{v:.0f}", va="center")
            if links:
                bar = {hue: h, "condition": c}
                label = f"{h} · {c}: {v:.0f}% (n = {part.loc[c, 'n']}); open its rows"
                link_point(ax, v, y, links(bar), label)
            for (_, cells), style in zip(marks, styles):
                if (h, c) in cells:
                    ax.plot(cells[h, c], y, **style, zorder=4)
    ax.set_yticks(range(len(conditions)))
    ax.set_yticklabels(conditions[::-1])
    ax.set_xlim(0, 108)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    handles = (
        [Line2D([], [], color=colours[h], lw=8, label=h) for h in hues] if len(hues) > 1 else []
    )
    handles += [Line2D([], [], **style, label=label) for (label, _), style in zip(marks, styles)]
    if handles:
        fig.legend(handles=handles, loc="outside upper center", ncol=2)
    if title:
        ax.set_title(title)
    return fig


def term_words(term: str) -> str:
    """A factor or interaction name as words: ``query_aware x tags`` -> ``query-aware × tags``."""
    return term.replace("_", "-").replace(" x ", " × ")


def _term_label(term: str, levels: dict | None = None) -> str:
    """:func:`term_words`, and a main effect with its two levels from ``levels`` (factor ->
    (high, low)) as what it measures: ``position (middle − first)``."""
    words = term_words(term)
    if levels and term in levels:
        high, low = levels[term]
        words += f" ({high} − {low})"
    return words


def _claim_label(ax, y: float, claim: int | None) -> None:
    """The paper's claimed sign of an effect, written just right of the axes at height ``y``."""
    if claim is not None:
        ax.annotate(
            {1: "paper: +", -1: "paper: −", 0: "paper: 0"}[claim],
            (1.0, y),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
        )


@book_figure
def effects_forest(
    effects,
    *,
    title: str | None = None,
    expected: dict | None = None,
    levels: dict | None = None,
):
    """Main effects and two-way interactions (``longctx.chapters.crossing.factorial.effects``) as a forest plot:
    estimate and 95% interval in points; main effects on top, each named with its two levels
    (``levels``: factor -> (high, low)). ``expected`` maps a main effect to its paper's
    claimed sign, written at the right."""
    import matplotlib.pyplot as plt

    by_size = effects.assign(size=effects["estimate"].abs()).sort_values("size", ascending=False)
    rows = pd.concat(
        [by_size[by_size["kind"] == "main"], by_size[by_size["kind"] != "main"]], ignore_index=True
    )
    fig, ax = plt.subplots(figsize=(COLUMN_INCHES, 0.32 * len(rows) + 1.4), layout="constrained")
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows.itertuples()):
        colour = OKABE_ITO[0] if r.kind == "main" else "0.5"
        ax.plot([r.ci_low, r.ci_high], [y, y], color=colour, lw=2.4 if r.kind == "main" else 1.4)
        ax.plot(r.estimate, y, "o" if r.kind == "main" else ".", color=colour)
        _claim_label(ax, y, (expected or {}).get(r.term))
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels([_term_label(t, levels) for t in rows["term"]])
    ax.set_xlabel("Effect on accuracy (points, 95% CI clustered by question)")
    ax.grid(axis="y", visible=False)
    if title:
        ax.set_title(title)
    return fig


@book_figure
def length_curves(curves, marks, *, paper=None, title: str | None = None):
    """Accuracy (shares, drawn in %) against context length on a log axis, one colour per
    ``reader`` with its 95% band; each reader's bar (``marks``: ``bar`` in %) dashed in its
    colour, and its effective length drawn on the bar with its interval on the grid
    (``length``, ``low``, ``high``: 0 is below the shortest length, inf beyond the longest,
    drawn at the axis's edge). ``paper`` holds published curves (``model``, ``length``,
    ``accuracy`` in %), drawn grey with open markers and labelled as theirs."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    readers = list(dict.fromkeys(curves["reader"]))
    colours = dict(zip(readers, OKABE_ITO))
    grid = sorted({float(x) for x in curves["length"]})
    if paper is not None and len(paper):
        grid = sorted(set(grid) | {float(x) for x in paper["length"]})
    edge = (grid[0] / 1.6, grid[-1] * 1.6)
    fig, ax = plt.subplots(figsize=(COLUMN_INCHES, 4.2), layout="constrained")
    handles = []
    for reader in readers:
        line = curves[curves["reader"] == reader].sort_values("length")
        colour = colours[reader]
        xs = line["length"].to_numpy(dtype=float)
        ax.plot(xs, 100 * line["accuracy"], "-o", color=colour, lw=MAIN_LW, ms=5, zorder=4)
        ax.fill_between(
            xs, 100 * line["ci_low"], 100 * line["ci_high"], color=colour, alpha=0.15, lw=0
        )
        handles.append(Line2D([], [], color=colour, lw=MAIN_LW, marker="o", ms=5, label=reader))
        for mark in marks[marks["reader"] == reader].to_dict("records"):
            _effective_length_mark(ax, mark, colour, edge)
    if paper is not None and len(paper):
        handles += _published_curves(ax, paper)
    handles += [
        Line2D([], [], color="0.3", ls="--", lw=OTHER_LW, label="85% of each reader's base"),
        Line2D([], [], **MARK_BAR, marker="|", ms=14, mew=3, label="effective length, 95% CI"),
    ]
    ax.set_xscale("log", base=2)
    ax.set_xticks(grid, [tokens_text(x) for x in grid])
    ax.minorticks_off()
    ax.set_xlim(edge[0] / 1.1, edge[1] * 1.1)
    ax.set_ylim(-2, 102)
    ax.set_xlabel("Context length (tokens, each reader's own tokenizer)")
    ax.set_ylabel("Accuracy (%)")
    _legend_below(fig, handles)
    if title:
        ax.set_title(title)
    return fig


MARK_BAR = {"color": "0.3", "lw": 5, "alpha": 0.45}  # an effective length's interval


def _effective_length_mark(ax, mark: dict, colour, edge: tuple[float, float]) -> None:
    """A reader's bar dashed across the axes, its effective length a tick on it (an arrow
    where it is only a lower bound) and its interval a thick band along it, up to the
    reader's ``longest`` measured length where some resamples never fall below the bar."""
    ax.axhline(mark["bar"], color=colour, ls="--", lw=OTHER_LW, zorder=2)
    low = edge[0] if mark["low"] == 0 else min(mark["low"], edge[1])
    # a bound "≥ the longest" ends at the reader's longest measured length, not the axis
    longest = mark.get("longest", edge[1])
    high = longest if np.isinf(mark["high"]) else mark["high"]
    below = mark["length"] is None or np.isnan(mark["length"])
    band = {**MARK_BAR, "color": colour}
    ax.plot([low, high], [mark["bar"]] * 2, **band, solid_capstyle="butt", zorder=3)
    marker = ">" if mark["at_least"] else "|"
    point = edge[0] if below else mark["length"]
    ax.plot(point, mark["bar"], marker=marker, color=colour, ms=14, mew=3, zorder=5)


def _published_curves(ax, paper) -> list:
    """A paper's curves (``model``, ``length``, ``accuracy`` in %), grey with one open marker
    per model; their legend entries, each marked as theirs."""
    from matplotlib.lines import Line2D

    handles = []
    for (model, part), marker in zip(paper.groupby("model", sort=False), PAPER_MARKERS):
        style = {**PAPER_STYLE, "color": "0.35", "mec": "0.35", "marker": marker}
        part = part.sort_values("length")
        ax.plot(part["length"], part["accuracy"], **style, zorder=3)
        handles.append(Line2D([], [], **style, label=f"NoLiMa: {model} (theirs)"))
    return handles


@book_figure
def readers_forest(
    reader_effects,
    readers,
    *,
    title: str | None = None,
    expected: dict | None = None,
    levels: dict | None = None,
):
    """Two readers' main effects (``longctx.chapters.crossing.factorial.reader_effects``) on one forest plot: per
    factor one interval per reader, offset vertically; factors ordered by the first
    reader's effect size. ``expected`` maps a factor to its paper's claimed sign."""
    import matplotlib.pyplot as plt

    first = reader_effects[reader_effects["reader"] == readers[0]]
    order = list(
        first.assign(size=first["estimate"].abs()).sort_values("size", ascending=False)["factor"]
    )
    fig, ax = plt.subplots(figsize=(COLUMN_INCHES, 0.6 * len(order) + 1.8), layout="constrained")
    ys = list(range(len(order)))[::-1]
    for i, (name, marker) in enumerate(zip(readers, ["o", "s"])):
        part = reader_effects[reader_effects["reader"] == name].set_index("factor").loc[order]
        offset = 0.15 - 0.3 * i
        for y, r in zip(ys, part.itertuples()):
            ax.plot([r.ci_low, r.ci_high], [y + offset, y + offset], color=OKABE_ITO[i], lw=2)
        ax.plot(
            part["estimate"],
            [y + offset for y in ys],
            marker,
            color=OKABE_ITO[i],
            ls="none",
            label=name,
        )
    for y, name in zip(ys, order):
        _claim_label(ax, y, (expected or {}).get(name))
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels([_term_label(t, levels) for t in order])
    ax.set_xlabel("Main effect on accuracy (points, 95% CI clustered by question)")
    ax.grid(axis="y", visible=False)
    fig.legend(loc="outside lower center", ncol=2)
    if title:
        ax.set_title(title)
    return fig


@book_figure
def interaction_plot(means, a: str, b: str, *, title: str | None = None):
    """Accuracy at the four level combinations of two factors (``longctx.chapters.crossing.factorial.cell_means``):
    one line per level of ``b`` across the levels of ``a``; parallel lines mean no interaction."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.6, 3.8), layout="constrained")
    levels_a = list(dict.fromkeys(means[a]))
    for i, (level, g) in enumerate(means.groupby(b, sort=False)):
        g = g.set_index(a).reindex(levels_a)
        xs = [j + (i - 0.5) * 0.06 for j in range(len(levels_a))]
        ax.errorbar(
            xs,
            g["accuracy"],
            yerr=[g["accuracy"] - g["ci_low"], g["ci_high"] - g["accuracy"]],
            marker="o",
            capsize=3,
            ls=LINESTYLES[i % len(LINESTYLES)],
            label=f"{term_words(b)}: {level}",
        )
    ax.set_xticks(range(len(levels_a)), levels_a)
    ax.set_xlim(-0.3, len(levels_a) - 0.7)
    ax.set_xlabel(term_words(a))
    ax.set_ylabel("Accuracy (%)")
    fig.legend(loc="outside lower center", ncol=2)
    if title:
        ax.set_title(title)
    return fig


@book_figure
def tokens_vs_accuracy(delimiters, correlation: dict, *, title: str, ylabel: str = "OAA (%)"):
    """Mean prompt tokens against accuracy (``OAA`` column), one point per delimiter with its bootstrap interval
    (``longctx.chapters.cnorm.numbers.by_delimiter``); the title carries Pearson r and its interval."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(COLUMN_INCHES, 4.0), layout="constrained")
    colours = OKABE_ITO[:7]  # not yellow: points must show on white
    for i, (_, row) in enumerate(delimiters.iterrows()):
        ax.errorbar(
            [row["prompt tokens"]],
            [100 * row["OAA"]],
            fmt="osD^vP*X"[i % 8],
            ms=7,
            capsize=3,
            lw=1,
            color=colours[i % len(colours)],
            label=row["format"],
            yerr=[[100 * (row["OAA"] - row["OAA_low"])], [100 * (row["OAA_high"] - row["OAA"])]],
        )
    fig.legend(loc="outside right center", title="Delimiter")
    ax.set(xlabel="Prompt tokens (mean)", ylabel=ylabel)
    ax.set_title(
        f"{title}: r = {correlation['r']:.2f}, 95% CI [{correlation['ci_low']:.2f}, "
        f"{correlation['ci_high']:.2f}]"
    )
    return fig


ATTENTION_BINS = 50  # the prompt cut into this many equal slices of tokens


def attention_mass(attention, bins: int = ATTENTION_BINS) -> np.ndarray:
    """The final token's attention summed over each of ``bins`` equal slices of the prompt:
    per-token weights (thousands of them, spiking at single tokens) drawn as lines tangle,
    while the mass per slice keeps where the attention goes."""
    weights = np.asarray(attention, dtype=float)
    edges = np.linspace(0, len(weights), bins + 1).round().astype(int)
    return np.array([weights[a:b].sum() for a, b in zip(edges[:-1], edges[1:])])


@book_figure
def attention_profiles(rows, formats, *, pairs: int):
    """Final-token attention over the prompt (log scale), as its mass per slice of the prompt
    (:func:`attention_mass`), one panel per id format and one line per gold position, ABS in
    the legend (rows of ``longctx.attention.attention_rows``)."""

    fig, axes = _panels(len(formats), 3.8)
    for ax, fmt in zip(axes[0], formats):
        for i, r in enumerate(r for r in rows if r["format"] == fmt):
            mass = attention_mass(r["attention"])
            ax.step(
                (np.arange(len(mass)) + 0.5) / len(mass),
                mass,
                where="mid",
                lw=1.4,
                color=OKABE_ITO[i],
                label=f"gold at {r['gold_position']}: ABS {r['abs']:.2f}",
            )
        ax.set(yscale="log", title=f"{fmt}, {pairs} pairs", xlabel="Relative token position")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2))  # below: the lines fill the panel
    axes[0][0].set_ylabel(f"Attention per 1/{ATTENTION_BINS} of the prompt")
    return fig


@book_figure
def paired_differences(table, *, xlabel: str, paper_label: str = "paper's change"):
    """One row per paired comparison (``label``, ``difference``, ``ci_low``, ``ci_high`` in
    points, and ``paper`` where the paper reports its change): our difference with its 95%
    interval, the paper's as an open diamond, top to bottom in the table's order."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    rows = table.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(COLUMN_INCHES, 0.55 * len(rows) + 1.6), layout="constrained")
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows.itertuples()):
        ax.plot([r.ci_low, r.ci_high], [y, y], color=OKABE_ITO[0], lw=2.4)
        ax.plot(r.difference, y, "o", color=OKABE_ITO[0])
        paper = getattr(r, "paper", None)
        if paper is not None and paper == paper:
            ax.plot(paper, y, **{**PAPER_STYLE, "ls": "none"}, zorder=4)
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(ys, rows["label"])
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    handles = [Line2D([], [], color=OKABE_ITO[0], lw=2.4, marker="o", label="ours, 95% CI")]
    if "paper" in rows and rows["paper"].notna().any():
        handles.append(Line2D([], [], **{**PAPER_STYLE, "ls": "none"}, label=paper_label))
    fig.legend(handles=handles, loc="outside lower center", ncol=2)
    return fig
