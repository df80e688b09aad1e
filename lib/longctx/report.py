"""Numbers for readers: rounded numbers, intervals in brackets, a dash for what a paper does
not report, the sample-size arithmetic behind each headline comparison, and the glue that
puts a computed number into a chapter's prose (MyST-NB ``glue``), so prose never retypes one."""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Sequence
from html import escape

import pandas as pd

MISSING = "—"


def pct(value: float, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage string; NaN becomes the dash."""
    return MISSING if value is None or value != value else f"{100 * value:.{digits}f}"


def percent_words(share: float) -> str:
    """A share in [0, 1] as captions and alt texts say it: ``45 percent``."""
    return f"{pct(share, 0)} percent"


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


def estimate_ci(value: float, low: float, high: float, *, scale: str = "points", bold=False) -> str:
    """A claim's number with its 95% interval in its unit: ``+2.5 [-5.0, +11.2]`` in points,
    ``r = -0.50 [-0.89, +0.32]`` for a correlation; ``bold`` marks the number for Markdown."""
    if value is None or value != value:
        return MISSING
    digits = 2 if scale == "r" else 1
    shown, interval = points_ci(value, low, high, digits).split(" ", 1)
    shown = f"r = {shown}" if scale == "r" else shown
    return f"{f'**{shown}**' if bold else shown} {interval}"


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


HEADER_WORDS = {  # column names the library computes -> words a reader expects
    "ci_low": "95% CI low",
    "ci_high": "95% CI high",
    "p_sign_flip": "p (sign-flip)",
    "acc_short": "accuracy, shortest",
    "acc_long": "accuracy, longest",
    "mean_ABS": "mean ABS",
    "position_sd": "sd over positions",
    "max_abs_diff": "largest difference",
    "eager_peak_mib": "eager peak (MiB)",
    "fast_peak_mib": "fast peak (MiB)",
    "eager_seconds": "eager (s)",
    "fast_seconds": "fast (s)",
    "eager_skipped": "eager skipped",
}


def elide(text: str, keep: int) -> str:
    """``text`` with its middle replaced by a count of the characters left out, when it is
    longer than twice ``keep`` (plus the length of that note)."""
    if len(text) <= 2 * keep + 80:
        return text
    left_out = len(text) - 2 * keep
    return f"{text[:keep]}\n\n[... {left_out:,} characters left out ...]\n\n{text[-keep:]}"


def readable_header(name) -> str:
    """A column name as a table header: a known name in words, else its underscores as
    spaces (``prompt_tokens`` -> ``prompt tokens``)."""
    name = str(name)
    return " ".join(HEADER_WORDS.get(part, part.replace("_", " ")) for part in name.split(" "))


P_COLUMN = re.compile(r"^p($|[ _(])")  # p, p_sign_flip, p (Holm), p_holm ...


def _p_values_as_written(table: pd.DataFrame) -> pd.DataFrame:
    """p-value columns (named ``p`` or ``p_...``) written as the prose writes p
    (:func:`format_p`: two significant digits, "< 0.001"), not to the table's decimals."""
    out = table.copy()
    for col in out.columns:
        if P_COLUMN.match(str(col)) and pd.api.types.is_float_dtype(out[col]):
            out[col] = out[col].map(lambda v: v if pd.isna(v) else format_p(v))
    return out


def _integers_as_integers(table: pd.DataFrame) -> pd.DataFrame:
    """Float columns whose every value is a whole number (counts that passed through a
    mean or a NaN) shown without ``.0``."""
    out = table.copy()
    for col in out.columns:
        values = out[col]
        if pd.api.types.is_float_dtype(values) and values.notna().any():
            present = values.dropna()
            if (present == present.round()).all() and present.abs().max() < 2**53:
                out[col] = values.astype("Int64")
    return out


def _numbers_as_written(table: pd.DataFrame, most: int = 4) -> pd.DataFrame:
    """Float columns written with one number of decimals each (the fewest, up to ``most``,
    that show every value as stored), so ``0.0`` never sits under ``0.029``; whole numbers
    with thousands separators, as the prose writes them."""
    out = table.copy()
    for col in out.columns:
        values = out[col]
        is_label = any(w in str(col).lower().split() for w in ("id", "seed", "year", "index"))
        if pd.api.types.is_integer_dtype(values) and not pd.api.types.is_bool_dtype(values):
            if is_label:  # a name that is a number, not a count
                continue
            out[col] = values.map(lambda v: v if pd.isna(v) else f"{v:,}")
            continue
        if not pd.api.types.is_float_dtype(values) or values.isna().all():
            continue
        present = values.dropna()
        places = max(
            len(f"{v:.{most}f}".rstrip("0").split(".")[1]) if math.isfinite(v) else 0
            for v in present
        )
        out[col] = values.map(lambda v, d=places: v if pd.isna(v) else f"{v:.{d}f}")
    return out


def collapsed(summary: str, body: str, *, narrow_only: bool = False) -> str:
    """MyST Markdown ``body`` (tables, lists) behind a closed toggle whose line reads
    ``summary``: the detail a reader opens, so a page of many tables stays short. The blank
    lines let the Markdown inside be parsed as Markdown. A ``narrow_only`` toggle is shown
    only on a narrow screen (``book/_static/tables.css``), for what a wide one shows otherwise."""
    classes = "longctx-details longctx-narrow" if narrow_only else "longctx-details"
    return f'<details class="{classes}"><summary>{summary}</summary>\n\n{body}\n\n</details>'


def and_list(words: Sequence[str]) -> str:
    """Words as prose lists them: ``a``, ``a and b``, ``a, b and c``; empty for none."""
    return ", ".join(words[:-1]) + f" and {words[-1]}" if len(words) > 1 else "".join(words)


def params_text(params: dict) -> str:
    """Parameters in words for a provenance line: ``name: value`` pairs, lists as
    comma-separated values and nested settings in parentheses (not a Python dict)."""

    def value(v) -> str:
        if isinstance(v, dict):
            return "(" + params_text(v) + ")"
        if isinstance(v, list | tuple):
            return ", ".join(value(x) for x in v) or "none"
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)

    return "; ".join(f"{k.replace('_', ' ')}: {value(v)}" for k, v in params.items())


def show(df, notes: str | None = None, *, caption: str | None = None, index: bool = False):
    """Display ``df`` as a clean HTML table for people: ``caption`` above it (what the table
    is, where prose does not say so just before it), no index, headers in words
    (:func:`readable_header`), whole-number columns without ``.0``, NaN as a dash, and a
    footnote if any cell is the dash or ``notes`` is given."""
    from IPython.display import HTML, display

    table = df.copy()
    if isinstance(
        table.columns, pd.MultiIndex
    ):  # ("OAA", "mean") -> "OAA mean": no stacked headers
        table.columns = [" ".join(str(p) for p in col if str(p)) for col in table.columns]
    table = _p_values_as_written(table)
    table.columns = [readable_header(c) for c in table.columns]
    table = _numbers_as_written(_integers_as_integers(table))
    table.columns.name = None
    if not isinstance(table.index, pd.MultiIndex):
        table.index.name = None
    has_missing = (
        bool(table.isna().to_numpy().any()) or (table.astype(str) == MISSING).to_numpy().any()
    )
    table = table.astype(object).where(table.notna(), MISSING)
    html = table.to_html(index=index, escape=True, border=0, classes="longctx-table")
    if caption:
        opening = html.index(">", html.index("<table")) + 1
        html = f"{html[:opening]}\n<caption>{escape(caption)}</caption>{html[opening:]}"
    foot = []
    if has_missing:
        foot.append(f"{MISSING}: not reported or not run.")
    if notes:
        foot.append(notes)
    if foot:
        html += f'<p class="longctx-note"><small>{" ".join(foot)}</small></p>'
    display(HTML(html))


def show_all(items) -> None:
    """Display each item in turn: a DataFrame, a ``(DataFrame, caption)`` pair or a Markdown
    string; for a part of a chapter whose tables depend on what was run."""
    for item in items:
        if isinstance(item, str):
            say(item)
        elif isinstance(item, tuple):  # (table, what it is): shown as its caption
            show(item[0], caption=item[1])
        else:
            show(item)


def say(markdown: str) -> None:
    """Display a Markdown paragraph computed from the data (the notebook's own prose is static)."""
    from IPython.display import Markdown, display

    display(Markdown(markdown))


def format_p(p: float) -> str:
    """A p-value as the book prints it: two significant digits kept even when the second is
    a zero (0.20, 1.0), "< 0.001" below that."""
    if p != p:
        return "n/a"
    return "< 0.001" if p < 0.001 else f"{p:#.2g}"


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
    notebook shows nothing. Whole numbers from 1,000 up are written with thousands
    separators as the prose writes them; other numbers keep their type
    (``{glue:text}`key:.1f```), strings are quoted as they are."""
    from myst_nb import glue  # the book's package: only notebooks call this

    for key, value in values.items():
        glue(key, thousands(value), display=False)


def thousands(value):
    """A whole number of 1,000 or more as text with separators (``1,456``); anything else as
    it is."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(value) >= 1000:
        return f"{value:,}"
    return value


def tokens_text(length: float) -> str:
    """A length on the grid in words people read: 250, 1K, 32K."""
    if length >= 1000 and length % 1000 == 0:
        return f"{int(length // 1000)}K"
    return f"{length:,.0f}"
