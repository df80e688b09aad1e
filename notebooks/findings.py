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
# book with Qwen2.5-Coder-0.5B-Instruct (Q4_K_M weights), where the papers use 7B to
# frontier models; a verdict is about this reader in this setting, not about the paper.

# %% tags=["parameters", "remove-cell"]
results_dir = "data/results"  # the committed generations

# %% tags=["remove-cell"]
from functools import partial

import matplotlib.pyplot as plt

from longctx import findings
from longctx.downloads import browser_href
from longctx.page import check_statements
from longctx.paths import resolve
from longctx.plots import forest
from longctx.reader import Reader
from longctx.report import glue_all, say

table = findings.findings_table(resolve(results_dir))
glue_all(findings.quoted(table))

# %% tags=["remove-input"]
say(findings.tally_markdown(table))

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Every headline claim measured in points, as a paired difference (treatment minus control, as named on the left). Bars: our 95% bootstrap interval over independent units; diamonds: the paper's reported effect where it gives one. Colour: the verdict.", "name": "fig-findings"}, "image": {"alt": "Forest plot of the paired differences in points, one per claim, coloured by verdict, with the paper's effects as diamonds."}}
forest(table[table["scale"] == "points"])
plt.show()

# %% [markdown]
# {numref}`fig-findings` shows every claim measured in points on one axis (the C-NORM token
# claim is a correlation, in the table only).
#
# **The verdict rule**, one function (`longctx.claims.judge`) for this page and every
# chapter. Each claim states in `data/paper/claims.csv`, before it is judged, its kind, an
# equivalence margin where the kind needs one, and a premise. Our number is a paired
# difference with a 95% bootstrap interval over independent units *n* (questions, needles,
# problems or examples) and an exact sign-flip p.
#
# * **premise not met**: what the claim takes for granted fails for this reader (a
#   closed-book floor, a retrieval that did not happen, a ceiling with less room than the
#   paper's effect); the direction and magnitude are still shown, but they do not test the
#   claim.
# * A **directional** claim is **reproduced** when the interval excludes 0 on the paper's
#   side and the exact test agrees (p < 0.05), **opposite direction** on the other side,
#   **not reproduced** when no direction is called and the interval excludes the paper's
#   effect, and **inconclusive at this n** otherwise. Its **magnitude** is judged apart:
#   the paper's effect inside our interval, ours larger or smaller, and the ratio, so a
#   direction reproduced at 18 times the paper's size says so.
# * A **saturation** claim ("beyond 20 documents accuracy barely improves") is reproduced
#   when the whole interval lies below its margin; a **no-effect** claim when the whole
#   interval lies within plus or minus its margin (two one-sided tests). An interval that
#   merely holds 0 is never agreement.
#
# Why both interval and test for a direction: when only a few units change between
# conditions, the percentile bootstrap can exclude 0 where the exact test cannot (4 changed
# questions, all one way: p = 2/16). The competition headline is the case in point: at
# {glue:text}`fi-sc-n` questions its EM difference is {glue:text}`fi-sc-em` with
# p = {glue:text}`fi-sc-p`, so EM stays inconclusive while inclusion, the paper's clearer
# signal, is reproduced.
#
# Each chapter's headline comparisons are sized so that their interval is at most 10
# points on each side (or use the paper's full n); a dagger (†) marks the secondary claims
# whose interval is still wider, whose verdicts are provisional. The tests recompute every
# number below with independent scorers written from the papers' metric definitions
# (`tests/test_findings.py`, `tests/test_findings_scorers.py`).

# %% tags=["remove-input"]
reader_folder = Reader().results_folder(resolve(results_dir))
say(
    findings.as_markdown(
        table, rows_href=partial(browser_href, resolve(results_dir), model_folder=reader_folder)
    )
)
say(findings.provenance(results_dir))
say(findings.download_line())

# %% tags=["remove-cell"]
check_statements("findings", findings.statements(table), results_dir == "data/results")

# %% [markdown]
# ## When a verdict moved
#
# A verdict can move when rows are added, a metric is corrected or the rule changes. Each
# move is recorded with its reason in `data/paper/verdict_changes.csv`, and the build fails
# when a claim's last recorded verdict is not its verdict now.

# %% tags=["remove-input"]
if results_dir == "data/results":  # the record describes the committed rows
    say(findings.moves_markdown(findings.verdict_changes(table)))
