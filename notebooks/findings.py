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
# Every headline claim of the five papers, judged on every reader that has committed rows:
# a row per claim, a column per model (a reader is one model on one backend, found in
# `data/results/`, so committing a new reader's rows adds it; a model's backends share its
# column as replications). A verdict is about that reader in our
# setting, where the papers use 7B to frontier models, not about the paper; what could make
# a verdict wrong, or right for the wrong reason, is gathered on {doc}`../book/threats`.

# %% tags=["parameters", "remove-cell"]
results_dir = "data/results"  # the committed generations

# %% tags=["remove-cell"]
from functools import partial

from longctx import export, findings, floor, matrix, replay
from longctx.chapters.effective_length import numbers as sweep_numbers
from longctx.downloads import browser_href
from longctx.page import check_statements, glue_figure, glue_missing
from longctx.paths import resolve
from longctx.plots import forest
from longctx.report import glue_all, say, show

claims_by_readers = matrix.build(resolve(results_dir))
table = matrix.default_findings(claims_by_readers, resolve(results_dir))
glue_all({**findings.quoted(table), **matrix.quoted(claims_by_readers)})

glue_figure(
    "fig-matrix",
    matrix.figure(claims_by_readers, rows_href=partial(browser_href, resolve(results_dir))),
    matrix.figure_text(claims_by_readers),
)
glue_figure("fig-findings", forest(table[table["scale"] == "points"]), findings.forest_text(table))

# %% [markdown]
# ```{glue:md} fig-matrix
# :format: myst
# ```

# %% tags=["remove-input"]
show(matrix.tally_table(claims_by_readers), caption=matrix.TALLY_CAPTION)

# %% [markdown]
# {numref}`fig-matrix` puts {glue:text}`fi-claims` claims against {glue:text}`fi-models`
# models, read on {glue:text}`fi-readers` model-backend pairs (readers):
# {glue:text}`fi-judged` reader cells hold a verdict, {glue:text}`fi-decided` of them a
# decided one. A verdict is decided only when it holds in at least {glue:text}`fi-stable` of
# {glue:text}`fi-resamples` resamples of the claim's units (questions, needles, problems or
# records, drawn with a seed taken from their ids, so any machine and any row order give the
# same draws); below that it reads "fragile" with its share. Each reader answers the same
# questions, needles, problems and records at the `claims` scale (`lib/longctx/scales/<chapter>.json`: exactly the arms the claims need, at
# the book's sizes), so a cell is judged only once every unit is stored; a reader with part
# of them is "part run", never judged from the subset.
#
# **Rules fixed before the rows.** Each claim's rule (its kind, margin, premise, direction
# and the paper's effect in `data/paper/claims.csv`) is dated by the git commit that gave it
# its present form, and each reader's rows carry the time they were made. A cell whose
# rule took its form after that reader's first row in the claim's store is marked ‡: its
# rule was not fixed in advance for that reader. {glue:text}`fi-prereg` of the
# {glue:text}`fi-judged` judged cells had their rule fixed before their rows. Of the default
# reader's {glue:text}`fi-default-judged` judged cells, {glue:text}`fi-default-marked` are
# marked: the chapters written before its rows have rules that came after them, while the
# later chapters' rules (the mitigations chapter's among them) were committed first.
#
# **One model, several backends.** A model's backends answer the same prompts with the same
# weights; where two of them judge a claim they are replications of one reader: the claim is
# decided for the model only when both give the same verdict, and reads "backend-sensitive"
# otherwise, with both numbers in the cell. Of the {glue:text}`fi-replicated` claims judged
# on two backends, {glue:text}`fi-backends-agree` get the same verdict from both and
# {glue:text}`fi-backend-sensitive` are backend-sensitive:

# %% tags=["remove-input"]
show(matrix.replication_table(claims_by_readers), caption=matrix.REPLICATION_CAPTION)

# %% [markdown]
# The tables below, one per paper (open one by its line; on a narrow screen, a card per
# claim), give each cell's number: the
# paired difference with its 95% interval, n (independent units), the verdict's mark, whether the premise holds, the chance floor where
# the claim has one (a guess among the keys or ids, or this reader's closed-book accuracy on
# the same NQ-Open questions), the share of answers that used their whole token budget and a
# link to the reader's rows, and how often the verdict holds over resamples of its units; a
# second backend's number and verdict follow on lines of their own. Hover over a cell
# without a verdict for the command that fills it, or why it cannot be filled here.

# %% tags=["remove-input"]
say(
    matrix.as_markdown(
        claims_by_readers,
        rows_href=partial(browser_href, resolve(results_dir)),
    )
)
say(matrix.cards_markdown(claims_by_readers, rows_href=partial(browser_href, resolve(results_dir))))
say(matrix.commands_markdown(claims_by_readers))
say(matrix.download_line())
say(export.download_line(claims_by_readers))

# %% [markdown]
# **The numerics floor.** A greedy answer can change with nothing but the prompts batched
# beside it (padding, the order of a kernel's sums) or the machine. Per reader, a fixed
# sample of its answers at the `claims` scale (drawn with a seed from the rows' keys, prompts
# up to 4,096 tokens) is asked again in another batch composition (`longctx floor`). An arm
# whose prompts are its control's, prompt for prompt, is never judged ("not testable"); an
# effect no larger than the share of answers that change here is arithmetic, not the paper:

# %% tags=["remove-input"]
floors = floor.floor_table(resolve("."))
if len(floors):
    show(floors, caption=floor.FLOOR_CAPTION)
else:
    say("No floor is measured yet: `longctx floor --model <model>` measures a reader's.")

# %% [markdown]
# (findings-effective-length)=
# ## Effective length
#
# How much of its window each reader uses: the longest length at which its accuracy stays
# at or above {glue:text}`el-nolima-share` of its own short-context base (NoLiMa's
# definition {cite}`modarressi2025nolima`; the base is its mean at 250, 500 and 1K tokens)
# or above {glue:text}`el-ruler-bar` (RULER's {cite}`hsieh2024ruler`), on the same needles
# at every length, with a 95% interval on the length from resampling needles. "≥" means the
# reader never fell below its bar on the lengths measured; "<" that it was below already at
# the shortest. A reader's curve stops at the first length not yet answered for every
# needle. The sweep's own chapter, {doc}`effective_length`, adds LongScore per length, the
# half-window comparison each reader's rule makes, and how literal each needle kind is.

# %% tags=["remove-input"]
lengths = findings.effective_lengths(resolve(results_dir))
glue_all(sweep_numbers.bars_quoted())
if lengths.found:
    show(sweep_numbers.lengths_table(lengths), caption=sweep_numbers.LENGTHS_CAPTION)
else:
    say("No reader has answered the sweep at every base length yet.")
show(sweep_numbers.published_lengths(), caption=sweep_numbers.PUBLISHED_CAPTION)
for kind, needles in sweep_numbers.design.KIND_NAMES.items():
    if (lengths.curves["kind"] == kind).any():
        figure = sweep_numbers.figure(lengths, kind)
        glue_figure(f"fig-findings-el-{kind}", figure, sweep_numbers.figure_text(lengths, kind))
    else:
        glue_missing(f"fig-findings-el-{kind}", f"No reader has {needles} at every base length.")

# %% [markdown]
# ```{glue:md} fig-findings-el-kv
# :format: myst
# ```
#
# ```{glue:md} fig-findings-el-qa
# :format: myst
# ```
#
# The chapters' own lengths were not chosen for this, but where they reach beyond the
# sweep's measured lengths they bound the effective length on their own tasks. The
# key-value chapter's sizes (synthetic pairs, then the paper's 140-pair records) and the
# length-alone chapter's GSM8K problems, without padding and with essay padding between
# the evidence and the question, give each reader a lower bound where every interval up
# to a length stays at or above {glue:text}`el-nolima-share` of the shortest length's
# accuracy, and an upper bound at the first length whose interval lies wholly below it.
# The tagging chapter's lengths are among the sweep's shortest, on the same needles, so a
# reader's sweep measures them itself.

# %% tags=["remove-input"]
show(findings.length_bounds_table(resolve(results_dir)), caption=findings.BOUNDS_CAPTION)

# %% [markdown]
# ## The default reader in detail
#
# Qwen2.5-Coder-0.5B-Instruct (Q4_K_M weights) has rows for every claim: the book's chapters
# show them. Its verdicts:

# %% tags=["remove-input"]
say(findings.tally_markdown(table))

# %% [markdown]
# ```{glue:md} fig-findings
# :format: myst
# ```

# %% [markdown]
# {numref}`fig-findings` shows every claim measured in points on one axis (the C-NORM token
# claim is a correlation, in the table only).
#
# **The verdict rule**, one function (`longctx.claims.judge`) for this page and every
# chapter. Each claim states in `data/paper/claims.csv` its kind, an equivalence margin
# where the kind needs one, and a premise; the matrix above marks (‡) every cell whose rule
# took that form after its reader's rows. Our number is a paired
# difference with a 95% bootstrap interval over independent units *n* (questions, needles,
# problems or examples) and an exact sign-flip p.
#
# * **premise not met**: what the claim takes for granted fails for this reader (a
#   closed-book floor, a retrieval that did not happen, a ceiling with less room than the
#   paper's effect); the direction and magnitude are still shown, but they do not test the
#   claim. A premise may join several checks; while one of them needs rows this reader has
#   not all stored (a recitation at the long length, say) and no other check fails, the
#   claim is **premise not measured**: shown, but not judged yet.
# * **not testable**: every unit's treatment prompts are its control prompts, byte for
#   byte (C-NORM's selection may choose no delimiter for a reader), so nothing was
#   changed; a difference there comes from batch composition alone and is never judged.
# * A **directional** claim is **reproduced** when the interval excludes 0 on the paper's
#   side and the exact test agrees (p < 0.05), **opposite direction** on the other side,
#   **not reproduced** when no direction is called and the interval excludes the paper's
#   effect, and **inconclusive at this n** otherwise. Its **magnitude** is judged apart:
#   the paper's effect inside our interval, ours larger or smaller, and the ratio, so a
#   direction reproduced at many times the paper's size says so.
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
# points on each side (or use the paper's full n); a dagger (†) marks a claim whose interval
# is still wider: under-powered, its verdict provisional (its note says how many units the
# observed spread would need). The tests recompute every
# number below with independent scorers written from the papers' metric definitions
# (`tests/test_findings.py`, `tests/test_findings_scorers.py`).

# %% tags=["remove-input"]
default = matrix.default_column(claims_by_readers).folder
say(
    findings.as_markdown(
        table, rows_href=partial(browser_href, resolve(results_dir), model_folder=default)
    )
)
say(findings.provenance(results_dir))
say(findings.download_line())

# %% tags=["remove-cell"]
check_statements(
    "findings",
    {**findings.statements(table), **matrix.statements(claims_by_readers)},
    results_dir == "data/results",
)

# %% [markdown]
# ## Rows from more than one machine
#
# A column can hold rows made on several machines: CPUs of two makes and GPUs, and on a CPU
# bfloat16 where it measures faster than float32, else float32 (each chapter's data line
# names them). Greedy decoding can round differently on each, so before a machine adds rows
# to a store that another machine began, a seeded sample of the stored rows is answered
# again on it (`longctx replay`, {doc}`../book/running`):

# %% tags=["remove-input"]
if results_dir == "data/results":  # the reports describe the committed rows
    say(replay.reports_markdown())

# %% [markdown]
# ## When a verdict moved
#
# A verdict can move when rows are added, a metric is corrected or the rule changes. Each
# move is recorded with its reason and its reader in `data/paper/verdict_changes.csv`, and
# the build fails when any reader's last recorded verdict of a claim is not its verdict now.

# %% tags=["remove-input"]
if results_dir == "data/results":  # the record describes the committed rows
    changes = findings.verdict_changes(table)
    unrecorded = matrix.unrecorded_moves(claims_by_readers, changes)
    assert not unrecorded, f"record these in data/paper/verdict_changes.csv: {unrecorded}"
    say(findings.moves_markdown(changes))
