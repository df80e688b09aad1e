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

# %% tags=["remove-cell"]
from longctx.page import setup

# %% [markdown]
# # The chapter's question, as a reader would ask it
#
# ```{glue:md} newchapter-verdicts
# :format: myst
# ```
#
# *A chapter page, the template: copy it to `notebooks/newchapter.py`, with its library module
# from `notebooks/templates/chapter_module.py` at `lib/longctx/chapters/newchapter.py`, and
# replace `newchapter` with your chapter's name everywhere. It is
# prose that calls that module: no functions here, every quoted number glued, code under
# 40% of the lines (`tests/test_notebooks.py` checks all three).*
#
# ## What we found
#
# Verdicts first, each with its number glued from the rows, the paper's number beside it,
# and why they differ:
#
# * **A key in the middle is found as often as one at the start.** With the pass key in
#   the middle of the filler instead of first, accuracy changes by
#   {glue:text}`newchapter-middle` ({glue:text}`newchapter-examples` keys, paired). The
#   paper {cite}`mohtashami2023landmark` hides its key in thousands of filler sentences;
#   here the context is a few hundred tokens.
#
# Each verdict says three things: the direction (the interval and the exact test agree),
# the size against the paper's effect, and whether the paper's premise holds for this
# reader (a closed-book floor, a retrieval rate, room below the ceiling). A claim of "no
# effect" is judged against an equivalence margin fixed in advance, never by an interval
# that holds zero. The words are checked on the book run: `view.said` in the module.
#
# **What the paper claims.** Who, where (section, figure), the number, for which models.
#
# **What we test.** The task, the reader, the sizes and why they answer the claim; what
# differs from the paper (the model's size, the context lengths, the data) and why.
#
# To rerun the chapter with another reader, one command (the store resumes, and only
# missing rows are generated):
#
# ```bash
# make run NB=notebooks/newchapter.py MODEL=Qwen/Qwen2.5-1.5B-Instruct
# ```

# %% tags=["parameters", "hide-input"]
model = "qwen2.5-coder-0.5b-instruct"  # alias, .gguf path, checkpoint directory or hub id
scale = "book"  # a parameter set named in lib/longctx/scales/newchapter.json
# The page also takes params, the set's overrides (e.g. {"examples": 16}), reader_options
# (how to reach the model), batch_size, token_budget and results_dir; each is explained
# in longctx.chapters.PAGE_PARAMETERS (`longctx run --help` lists them).

# %% tags=["remove-cell"]
page = setup("newchapter", globals())

# %% [markdown]
# The prompts come from `longctx.chapters.newchapter.plan`, which `longctx reproduce` also
# calls; stored rows are reused and the model loads only for missing ones.

# %%
run = page.run(record=("seed",))  # new rows say which keys they were asked on
view = page.analyze(run)

# %% tags=["remove-cell"]
page.show("figure")

# %% [markdown]
# ```{glue:md} fig-newchapter-headline
# :format: myst
# ```

# %% tags=["remove-input"]
page.show("example")

# %% tags=["remove-input"]
page.show("provenance")

# %% [markdown]
# {numref}`fig-newchapter-headline`: the caption and alt text come from `figure_text` in the
# module, computed from what the figure draws (n per point, what the bands are), never
# typed here. The paper's curve goes beside ours where it reports one (the `paper=`
# argument of `longctx.plots`' figures). Under the figure: a right and a wrong answer with
# their prompts, collapsed, and the link to every row of the store in the sample browser
# (an `Example` part of a section). Each `page.show(name)` renders one section the module
# declares (`SECTIONS`): its tables, figures and computed paragraphs.

# %% [markdown]
# (newchapter-headline)=
# ## The headline comparison
#
# What is compared, paired by which unit (question, problem, record), which interval
# (bootstrap over that unit) and which test (sign-flip), with n beside every number.
#
# **How n was chosen.** For a paired difference of 0/1 outcomes the 95% half-width is about
# $1.96\,s/\sqrt{n}$; the book run's n gives at most ±10 points (`report.n_for_half_width`
# from the observed per-unit differences).

# %% tags=["hide-input"]
page.show("accuracy")

# %% [markdown]
# ## The paper's numbers beside ours
#
# The paper's own numbers (`data/paper/newchapter.csv`), and plainly why ours differ: the
# reader, the lengths, the data, the prompt.

# %% tags=["remove-input"]
page.show("paper")

# %% [markdown]
# ## At the paper's scale
#
# `scales/newchapter.json` holds a `paper` set; on a GPU:
# `longctx reproduce --chapters newchapter --scale paper --model <hub id>`.

# %% tags=["remove-cell"]
page.finish()  # every statement still holds; every result consistent
