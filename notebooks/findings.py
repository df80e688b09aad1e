# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (findings)=
# # Findings at a glance
#
# Each row is one headline claim of one paper, tested on the committed generations of this
# book: the claim, the paper's number, ours as a paired difference with its 95% interval
# and the number of independent units *n* (questions, problems or examples; rows that share
# one are resampled together), and a verdict. Nothing on this page is typed by hand: it is
# computed by `longctx.findings.findings_table` from `data/results/`, and a unit test
# recomputes every verdict.
#
# **The verdict rule.** For a claim whose paper reports an effect in a given direction:
#
# * **reproduced**: our 95% interval excludes 0 on the paper's side, and the sign-flip test
#   agrees (p < 0.05);
# * **opposite direction**: the same on the other side;
# * **not reproduced**: no direction called, and our interval excludes the paper's reported
#   effect, so an effect as large as the paper's is ruled out for this reader;
# * **inconclusive at this n**: no direction called, and our interval holds the paper's
#   effect (or the paper gives no size to rule out).
#
# Why both the interval and the test: when only a few units change between conditions, the
# percentile bootstrap can exclude 0 where the exact test cannot. The competition headline
# was the case in point at 40 questions: 4 changed, all one way, so the interval was
# [+2.5, +20.0] but p = 2/16 = 0.125. At {glue:text}`fi-sc-n` questions its EM difference
# is {glue:text}`fi-sc-em` with p = {glue:text}`fi-sc-p`, on the line, so EM stays
# inconclusive while inclusion, the paper's clearer signal, is reproduced.
#
# Each chapter's headline comparisons are sized so that their interval is at most 10 points
# on each side (or use the paper's full n); a dagger (†) marks the secondary claims whose
# interval is still wider, whose verdicts are provisional.
#
# Our reader is a 0.5B coder model (Qwen2.5-Coder-0.5B-Instruct), where the papers use 7B
# to frontier models, and several of our settings are smaller than the papers'; each
# chapter says how. A verdict is about this reader in this setting, not about the paper.

# %% tags=["parameters", "remove-cell"]
results_dir = "data/results"  # the committed generations

# %% tags=["remove-cell"]
import matplotlib.pyplot as plt

from longctx import findings
from longctx.page import check_statements
from longctx.paths import resolve
from longctx.plots import forest
from longctx.report import glue_all, say

table = findings.findings_table(resolve(results_dir))
glue_all(findings.quoted(table))

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Every headline claim as a paired difference in points (treatment minus control, as named on the left). Bars: our 95% bootstrap interval over independent units; diamonds: the paper's reported effect where it gives one. Colour: the verdict.", "name": "fig-findings"}, "image": {"alt": "Forest plot of twenty-six paired differences, one per claim, with the paper's effects as diamonds."}}
forest(table)
plt.show()

# %% [markdown]
# {numref}`fig-findings` shows every claim on one axis; the table below gives the numbers
# and links each claim to the chapter section that shows its data.

# %% tags=["remove-input"]
say(findings.as_markdown(table))
say(findings.provenance(results_dir))

# %% tags=["remove-cell"]
check_statements("findings", findings.statements(table), results_dir == "data/results")
