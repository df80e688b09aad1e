"""Numbers for readers: rounded numbers, intervals in brackets, a dash for what a paper does
not report, the sample-size arithmetic behind each headline comparison, and the glue that
puts a computed number into a chapter's prose (MyST-NB ``glue``), so prose never retypes one."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

MISSING = "—"


def pct(value: float, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage string; NaN becomes the dash."""
    return MISSING if value is None or value != value else f"{100 * value:.{digits}f}"


def pct_ci(value: float, low: float, high: float, digits: int = 1) -> str:
    """``88.0 [80.2, 93.1]`` from shares in [0, 1]."""
    if value is None or value != value:
        return MISSING
    return f"{100 * value:.{digits}f} [{100 * low:.{digits}f}, {100 * high:.{digits}f}]"


def points_ci(diff: float, low: float, high: float, digits: int = 1) -> str:
    """``-55.0 [-67.0, -43.0]`` from differences already in points."""
    if diff is None or diff != diff:
        return MISSING
    diff, low, high = (round(v, digits) + 0.0 for v in (diff, low, high))  # + 0.0: never "-0.0"
    return f"{diff:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def n_for_half_width(
    differences: Sequence[float], half_width: float = 0.10, z: float = 1.96
) -> int:
    """Units needed for a 95% interval of +-``half_width`` on the mean of paired per-unit
    differences, from their observed standard deviation: n = (z s / h)^2, rounded up. For
    0/1 outcomes s^2 = d - m^2, with d the share of discordant units and m the mean
    difference, so the paired design needs fewer units the fewer units change."""
    values = list(differences)
    if len(values) < 2:
        return 0
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.ceil((z * math.sqrt(var) / half_width) ** 2)


def show(df, notes: str | None = None, *, index: bool = False):
    """Display ``df`` as a clean HTML table (no index, NaN as a dash, a footnote if any cell
    is the dash or ``notes`` is given)."""
    from IPython.display import HTML, display

    table = df.copy()
    if isinstance(
        table.columns, pd.MultiIndex
    ):  # ("OAA", "mean") -> "OAA mean": no stacked headers
        table.columns = [" ".join(str(p) for p in col if str(p)) for col in table.columns]
    table.columns.name = None
    if not isinstance(table.index, pd.MultiIndex):
        table.index.name = None
    has_missing = (
        bool(table.isna().to_numpy().any()) or (table.astype(str) == MISSING).to_numpy().any()
    )
    table = table.astype(object).where(table.notna(), MISSING)
    html = table.to_html(index=index, escape=True, border=0, classes="longctx-table")
    foot = []
    if has_missing:
        foot.append(f"{MISSING}: not reported or not run.")
    if notes:
        foot.append(notes)
    if foot:
        html += f'<p class="longctx-note"><small>{" ".join(foot)}</small></p>'
    display(HTML(html))


def show_all(items) -> None:
    """Display each item in turn: a DataFrame, a ``(DataFrame, note)`` pair or a Markdown
    string; for a part of a chapter whose tables depend on what was run."""
    for item in items:
        if isinstance(item, str):
            say(item)
        elif isinstance(item, tuple):
            show(*item)
        else:
            show(item)


def say(markdown: str) -> None:
    """Display a Markdown paragraph computed from the data (the notebook's own prose is static)."""
    from IPython.display import Markdown, display

    display(Markdown(markdown))


def format_p(p: float) -> str:
    """A p-value as the book prints it: two significant digits, "< 0.001" below that."""
    if p != p:
        return "n/a"
    return "< 0.001" if p < 0.001 else f"{p:.2g}"


def p_text(p: float) -> str:
    """``p < 0.001`` below a thousandth, else two significant digits (``p = 0.07``)."""
    shown = format_p(p)
    return f"p {shown}" if shown.startswith("<") else f"p = {shown}"


def estimate_text(est, unit: str = "points") -> str:
    """``-50.9 points [-59.4, -41.8], n = 165, p < 0.001`` for a paired estimate
    (:class:`~longctx.claims.Estimate`, differences in points)."""
    # Never "-0.0"
    diff, low, high = (round(v, 1) + 0.0 for v in (est.difference, est.ci_low, est.ci_high))
    return f"{diff:+.1f} {unit} [{low:+.1f}, {high:+.1f}], n = {est.n}, {p_text(est.p)}"


def glue_all(values: dict) -> None:
    """Glue every value under its key (MyST-NB), for ``{glue:text}`key``` in the prose; the
    notebook shows nothing. Numbers keep their type (``{glue:text}`key:.1f```), strings are
    quoted as they are."""
    from myst_nb import glue  # the book's package: only notebooks call this

    for key, value in values.items():
        glue(key, value, display=False)
