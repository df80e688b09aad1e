"""Figures shared by the chapters."""

from __future__ import annotations


def accuracy_by_position(summary, *, x: str = "position", facet: str = "num_pairs", hue: str = "model",
                         style: str | None = None, facet_title: str = "{} pairs", xlabel: str = "Position of gold item",
                         title: str | None = None):
    """Accuracy vs gold position, one panel per ``facet`` value, one line per ``hue``
    (and ``style``), with a shaded band for each row's ``ci_low``..``ci_high``."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    facets = sorted(summary[facet].unique())
    fig, axes = plt.subplots(1, len(facets), figsize=(4.2 * len(facets), 3.4), squeeze=False, sharey=True)
    palette = dict(zip(sorted(summary[hue].unique()), sns.color_palette("colorblind")))
    styles = sorted(summary[style].unique()) if style else [None]
    dashes = dict(zip(styles, ["-", "--", ":", "-."]))
    for ax, value in zip(axes[0], facets):
        panel = summary[summary[facet] == value]
        for (h, s), line in panel.groupby([hue, style] if style else [hue, hue]):
            line = line.sort_values(x)
            label = f"{h}" + (f", {style}={s}" if style else "")
            ax.plot(line[x], 100 * line["accuracy"], dashes[s if style else None], marker="o",
                    color=palette[h], label=label)
            ax.fill_between(line[x], 100 * line["ci_low"], 100 * line["ci_high"], color=palette[h], alpha=0.15)
        ax.set_title(facet_title.format(value))
        ax.set_xlabel(xlabel)
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Accuracy (%)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)), frameon=False,
               bbox_to_anchor=(0.5, -0.02 - 0.06 * ((len(labels) - 1) // 3)))
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.08 + 0.06 * ((len(labels) - 1) // 3), 1, 1))
    return fig


def retention_curves(curve, *, h: str = "num_hard", facet: str = "metric", hue: str = "retriever",
                     threshold: float = 0.5, title: str | None = None):
    """Retention R(H) vs H, one panel per ``facet`` value (e.g. EM, F1), one line per ``hue``,
    with each row's ``R_low``..``R_high`` band and the half-retention line."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    facets = list(dict.fromkeys(curve[facet]))
    fig, axes = plt.subplots(1, len(facets), figsize=(4.2 * len(facets), 3.4), squeeze=False, sharey=True)
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
