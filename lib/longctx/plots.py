"""Figures shared by the chapters."""

from __future__ import annotations

import numpy as np
import pandas as pd


def accuracy_by_position(
    summary,
    *,
    x: str = "position",
    facet: str = "num_pairs",
    hue: str = "model",
    style: str | None = None,
    facet_title: str = "{} pairs",
    xlabel: str = "Position of gold item",
    title: str | None = None,
    panel_width: float = 4.2,
    xlim: tuple | None = None,
):
    """Accuracy vs gold position, one panel per ``facet`` value, one line per ``hue``
    (and ``style``), with a shaded band for each row's ``ci_low``..``ci_high``."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    facets = sorted(summary[facet].unique())
    fig, axes = plt.subplots(
        1, len(facets), figsize=(panel_width * len(facets), 3.4), squeeze=False, sharey=True
    )
    palette = dict(zip(sorted(summary[hue].unique()), sns.color_palette("colorblind")))
    styles = sorted(summary[style].unique()) if style else [None]
    dashes = dict(zip(styles, ["-", "--", ":", "-."]))
    for ax, value in zip(axes[0], facets):
        panel = summary[summary[facet] == value]
        for (h, s), line in panel.groupby([hue, style] if style else [hue, hue]):
            line = line.sort_values(x)
            label = f"{h}" + (f", {style}={s}" if style else "")
            ax.plot(
                line[x],
                100 * line["accuracy"],
                dashes[s if style else None],
                marker="o",
                color=palette[h],
                label=label,
            )
            ax.fill_between(
                line[x], 100 * line["ci_low"], 100 * line["ci_high"], color=palette[h], alpha=0.15
            )
        ax.set_title(facet_title.format(value))
        ax.set_xlabel(xlabel)
        ax.set_ylim(-2, 102)
        if xlim:
            ax.set_xlim(*xlim)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Accuracy (%)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=min(3, len(labels)),
        frameon=False,
        bbox_to_anchor=(0.5, -0.02 - 0.06 * ((len(labels) - 1) // 3)),
    )
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.08 + 0.06 * ((len(labels) - 1) // 3), 1, 1))
    return fig


def retention_curves(
    curve,
    *,
    h: str = "num_hard",
    facet: str = "metric",
    hue: str = "retriever",
    threshold: float = 0.5,
    title: str | None = None,
):
    """Retention R(H) vs H, one panel per ``facet`` value (e.g. EM, F1), one line per ``hue``,
    with each row's ``R_low``..``R_high`` band and the half-retention line."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    facets = list(dict.fromkeys(curve[facet]))
    fig, axes = plt.subplots(
        1, len(facets), figsize=(4.2 * len(facets), 3.4), squeeze=False, sharey=True
    )
    palette = dict(zip(sorted(curve[hue].unique()), sns.color_palette("colorblind")))
    for ax, value in zip(axes[0], facets):
        for name, line in curve[curve[facet] == value].groupby(hue):
            line = line.sort_values(h)
            ax.plot(line[h], line["R"], marker="o", color=palette[name], label=name)
            ax.fill_between(line[h], line["R_low"], line["R_high"], color=palette[name], alpha=0.15)
        ax.axhline(threshold, color="grey", ls="--", lw=1)
        ax.set_title(str(value))
        ax.set_xlabel("Hard negatives H")
        ax.set_xticks(sorted(curve[h].unique()))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Retention R(H) = M(H) / M(0)")
    axes[0][0].set_ylim(bottom=0)
    axes[0][-1].legend(frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


VERDICT_COLOURS = {  # Okabe-Ito: told apart with any colour vision
    "reproduced": "#009E73",
    "opposite direction": "#D55E00",
    "not reproduced": "#E69F00",
    "inconclusive at this n": "#999999",
    "premise not met": "#56B4E9",
}


def forest(table, *, title: str | None = None):
    """One row per claim: our difference with its 95% interval (coloured by verdict) and the
    paper's effect as a diamond where it reports one (``paper_effect`` column, optional)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    rows = table.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(7.5, 0.38 * len(rows) + 1.4))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows.itertuples()):
        colour = VERDICT_COLOURS.get(r.verdict, "black")
        ax.plot([r.ci_low, r.ci_high], [y, y], color=colour, lw=2.2)
        ax.plot(r.difference, y, "o", color=colour)
        effect = getattr(r, "paper_effect", None)
        if effect is not None and effect == effect:
            ax.plot(effect, y, "D", mfc="white", mec="black", ms=6)
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels(
        [getattr(r, "short", None) or f"{r.paper}: {r.comparison}" for r in rows.itertuples()],
        fontsize=9,
    )
    ax.set_xlabel("Difference (points)")
    ax.grid(axis="x", alpha=0.3)
    handles = [
        Line2D([], [], color=c, lw=2.2, marker="o", label=v) for v, c in VERDICT_COLOURS.items()
    ]
    handles.append(
        Line2D([], [], ls="", marker="D", mfc="white", mec="black", label="paper's effect")
    )
    ax.legend(
        handles=handles,
        fontsize=8,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=3,
        frameon=False,
    )
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def condition_bars(
    summary,
    *,
    order,
    hue: str,
    value: str = "accuracy",
    xlabel: str = "Accuracy (%)",
    title: str | None = None,
):
    """Horizontal bars of ``value`` per condition (in ``order``), grouped by ``hue``, with
    each row's ``ci_low``..``ci_high`` as a whisker (values are shares, drawn in %)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    hues = list(dict.fromkeys(summary[hue]))
    palette = dict(zip(hues, sns.color_palette("colorblind")))
    conditions = [c for c in order if c in set(summary["condition"])]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(conditions) * max(1, len(hues)) ** 0.5 + 1.3))
    height = 0.8 / len(hues)
    for k, h in enumerate(hues):
        part = summary[summary[hue] == h].set_index("condition")
        ys, vals, los, his = [], [], [], []
        for i, c in enumerate(conditions):
            if c in part.index:
                ys.append(
                    len(conditions) - 1 - i + (len(hues) - 1 - k - (len(hues) - 1) / 2) * height
                )
                vals.append(100 * part.loc[c, value])
                los.append(100 * part.loc[c, "ci_low"])
                his.append(100 * part.loc[c, "ci_high"])
        vals, los, his = map(np.asarray, (vals, los, his))
        ax.barh(ys, vals, height=height * 0.9, color=palette[h], label=h)
        ax.errorbar(
            vals, ys, xerr=[vals - los, his - vals], fmt="none", ecolor="black", capsize=2, lw=1
        )
        for y, v, hi in zip(ys, vals, his):
            ax.text(min(hi + 1.5, 101), y, f"{v:.0f}", va="center", fontsize=8)
    ax.set_yticks(range(len(conditions)))
    ax.set_yticklabels(conditions[::-1])
    ax.set_xlim(0, 106)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    if len(hues) > 1:
        ax.legend(
            frameon=False, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(hues)
        )
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def _claim_label(ax, y: float, claim: int | None) -> None:
    """The paper's claimed sign of an effect, written just right of the axes at height ``y``."""
    if claim is not None:
        ax.annotate(
            {1: "paper: +", -1: "paper: -", 0: "paper: 0"}[claim],
            (1.0, y),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )


def effects_forest(effects, *, title: str | None = None, expected: dict | None = None):
    """Main effects and two-way interactions (``longctx.chapters.crossing.factorial.effects``) as a forest plot:
    estimate and 95% interval in points; main effects on top. ``expected`` maps a main
    effect to its paper's claimed sign, drawn as an arrow at the right."""
    import matplotlib.pyplot as plt

    by_size = effects.assign(size=effects["estimate"].abs()).sort_values("size", ascending=False)
    rows = pd.concat(
        [by_size[by_size["kind"] == "main"], by_size[by_size["kind"] != "main"]], ignore_index=True
    )
    fig, ax = plt.subplots(figsize=(7.5, 0.3 * len(rows) + 1.4))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows.itertuples()):
        colour = "C0" if r.kind == "main" else "C7"
        ax.plot([r.ci_low, r.ci_high], [y, y], color=colour, lw=2.2 if r.kind == "main" else 1.4)
        ax.plot(r.estimate, y, "o" if r.kind == "main" else ".", color=colour)
        _claim_label(ax, y, (expected or {}).get(r.term))
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels(rows["term"], fontsize=8)
    ax.set_xlabel("Effect on accuracy (points, 95% CI clustered by question)")
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def readers_forest(
    reader_effects, readers, *, title: str | None = None, expected: dict | None = None
):
    """Two readers' main effects (``longctx.chapters.crossing.factorial.reader_effects``) on one forest plot: per
    factor one interval per reader, offset vertically; factors ordered by the first
    reader's effect size. ``expected`` maps a factor to its paper's claimed sign."""
    import matplotlib.pyplot as plt

    first = reader_effects[reader_effects["reader"] == readers[0]]
    order = list(
        first.assign(size=first["estimate"].abs()).sort_values("size", ascending=False)["factor"]
    )
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(order) + 1.6))
    ys = list(range(len(order)))[::-1]
    for i, (name, marker) in enumerate(zip(readers, ["o", "s"])):
        part = reader_effects[reader_effects["reader"] == name].set_index("factor").loc[order]
        offset = 0.15 - 0.3 * i
        for y, r in zip(ys, part.itertuples()):
            ax.plot([r.ci_low, r.ci_high], [y + offset, y + offset], color=f"C{i}", lw=2)
        ax.plot(
            part["estimate"], [y + offset for y in ys], marker, color=f"C{i}", ls="none", label=name
        )
    for y, name in zip(ys, order):
        _claim_label(ax, y, (expected or {}).get(name))
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels(order, fontsize=9)
    ax.set_xlabel("Main effect on accuracy (points, 95% CI clustered by question)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def interaction_plot(means, a: str, b: str, *, title: str | None = None):
    """Accuracy at the four level combinations of two factors (``longctx.chapters.crossing.factorial.cell_means``):
    one line per level of ``b`` across the levels of ``a``; parallel lines mean no interaction."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.6))
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
            label=f"{b}: {level}",
        )
    ax.set_xticks(range(len(levels_a)), levels_a)
    ax.set_xlabel(a)
    ax.set_ylabel("Accuracy (%)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def tokens_vs_accuracy(delimiters, correlation: dict, *, title: str, ylabel: str = "OAA (%)"):
    """Mean prompt tokens against accuracy (``OAA`` column), one point per delimiter with its bootstrap interval
    (``longctx.chapters.cnorm.by_delimiter``); the title carries Pearson r and its interval."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for i, (_, row) in enumerate(delimiters.iterrows()):
        ax.errorbar(
            [row["prompt tokens"]],
            [100 * row["OAA"]],
            fmt="osD^vP*X"[i % 8],
            capsize=3,
            lw=1,
            color=f"C{i}",
            label=row["format"],
            yerr=[[100 * (row["OAA"] - row["OAA_low"])], [100 * (row["OAA_high"] - row["OAA"])]],
        )
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set(xlabel="Prompt tokens (mean)", ylabel=ylabel)
    ax.set_title(
        f"{title}: r = {correlation['r']:.2f}, bootstrap 95% CI [{correlation['ci_low']:.2f}, "
        f"{correlation['ci_high']:.2f}]",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    return fig


def attention_profiles(rows, formats, *, pairs: int):
    """Final-token attention over the prompt (log scale), one panel per id format and one line
    per gold position, ABS in the legend (rows of ``longctx.attention.attention_rows``)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(formats), figsize=(10, 3.4), sharey=True, squeeze=False)
    for ax, fmt in zip(axes[0], formats):
        for r in [r for r in rows if r["format"] == fmt]:
            ax.plot(
                np.linspace(0, 1, len(r["attention"])),
                r["attention"],
                lw=0.8,
                label=f"gold at {r['gold_position']} (ABS {r['abs']:.2f})",
            )
        ax.set(yscale="log", title=f"{fmt}, {pairs} pairs", xlabel="Relative token position")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("Final-token attention (last layer)")
    fig.tight_layout()
    return fig
