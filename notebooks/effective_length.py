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
# # How much of its window does each reader use? Effective length, with an interval
#
# ```{glue:md} effective_length-verdicts
# :format: myst
# ```
#
# {glue:text}`el-answer`
#
# **The question.** A long-context reader's window says how much text it accepts, not how
# much it uses. RULER {cite}`hsieh2024ruler` calls a length effective while the reader's
# score stays above Llama-2-7B's {glue:text}`el-ruler-bar` at 4K tokens; NoLiMa
# {cite}`modarressi2025nolima` while it stays at or above {glue:text}`el-nolima-share` of
# the reader's own score at short lengths. Neither gives an interval on the length, so two
# readers a length apart cannot be told apart. Here the same needles are asked at every
# length, the interval comes from resampling them, and three definitions are read off one
# curve.
#
# **What we test.** Two needle kinds, each at every length from 250 tokens to the reader's
# window (lengths counted with its own tokenizer), each needle at one of five depths in turn:
# {glue:text}`el-kv-needles` key-value needles (Lost in the Middle's records, a literal
# match: the question names the key) and {glue:text}`el-qa-questions` needle questions in
# Paul Graham essays (the tagging chapter's, written as NoLiMa's are so that the question
# does not repeat its needle's words: {glue:text}`el-overlap`). {glue:text}`el-pending`

# %% tags=["parameters", "hide-input"]
model = "qwen2.5-coder-0.5b-instruct"  # alias, .gguf path, checkpoint directory or hub id
scale = "book"  # a parameter set named in lib/longctx/scales/effective_length.json
# The page also takes params, the set's overrides (e.g. {"lengths": [250, 500, 1000, 2000]}),
# reader_options, batch_size, token_budget and results_dir; each is explained in
# longctx.chapters.PAGE_PARAMETERS (`longctx run --help` lists them).

# %% tags=["remove-cell"]
page = setup("effective_length", globals())

# %% [markdown]
# Every prompt comes from the chapter's `plan` (`longctx.chapters.effective_length`), which
# `longctx reproduce` also calls, so a run elsewhere stores exactly the rows this page reads.
# `longctx reproduce --scale sweep --chapters effective_length --dry-run --count-tokens`
# prints each block's requests, prompt tokens and hours at the reader's measured speed.

# %% tags=["hide-input"]
run = page.run(record=("kv_needles", "seed"))
view = page.analyze(run)

# %% [markdown]
# (el-headline)=
# ## Effective length per reader
#
# Each reader's effective length under NoLiMa's definition (its own base) and RULER's (a
# fixed bar), with the 95% percentile interval on the length from resampling needles, seeded
# by the needles themselves so any machine draws the same resamples. "≥" means the reader
# never fell below its bar on the lengths measured; "<" that it was below already at the
# shortest. A reader's curve stops at the first length not yet answered for every needle.

# %% tags=["remove-input"]
page.show("lengths")

# %% [markdown]
# ## Accuracy by length
#
# One line per reader with its 95% band, its NoLiMa bar dashed, its effective length marked
# with the interval on the length. NoLiMa's own curves are drawn beside the needle questions
# for scale: their models are far larger, and their needles were written for the purpose.

# %% tags=["remove-cell"]
page.show("figures")

# %% [markdown]
# ```{glue:md} fig-el-kv
# :format: myst
# ```
#
# ```{glue:md} fig-el-qa
# :format: myst
# ```

# %% [markdown]
# ## The half-window claim
#
# The premise the five papers share is that accuracy falls with length well inside the
# window. Stated as a rule before the sweep's first row: a reader's accuracy at the longest
# length within half its window is below {glue:text}`el-nolima-share` of its own base,
# paired by needle, with the interval deciding. Its premise: the reader finds at least half
# the needles at the short lengths, so the bar stands well above chance.

# %% tags=["remove-input"]
page.show("half-window")

# %% [markdown]
# ## LongScore per length
#
# 100-LongBench's relative score reads the same curve as a loss against the reader's own
# base, length by length, without a bar.

# %% tags=["remove-input"]
page.show("longscore")

# %% [markdown]
# ## How literal each needle kind is
#
# A reader that finds a needle by matching the question's words has an easier task than one
# that must link them. The overlap is measured, not assumed: the content words a question
# shares with its needle, the answer's own words left out.

# %% tags=["remove-input"]
page.show("overlap")

# %% tags=["remove-input"]
page.show("provenance")

# %% [markdown]
# ## Where ours differs from NoLiMa and RULER
#
# - **Readers.** Ours have windows of 8K and 32K tokens and at most 1.5B parameters; the
#   NoLiMa curves drawn here are GPT-4o's and Llama 3.3 70B's, with windows of 128K.
# - **Needles.** Key-value records are RULER-like literal retrieval; the needle questions
#   are the tagging chapter's, fewer than NoLiMa's and written for this project, though like
#   NoLiMa's they share no content word with their needle (measured above). Every answer is
#   greedy.
# - **The interval.** Both papers report one length per reader; ours resamples needles,
#   the claim's unit, and recomputes the curve and its length each time.
#
# ## A worked example
#
# A needle question at the book's longest length and the reader's answers; the link opens
# every row of the chapter's store in the sample browser.

# %% tags=["remove-input"]
page.show("example")

# %% tags=["remove-input"]
page.show("downloads")

# %% tags=["remove-cell"]
page.finish()
