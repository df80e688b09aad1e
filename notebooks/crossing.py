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
# # Crossing the papers: which manipulation matters most?
#
# ```{glue:md} crossing-verdicts
# :format: myst
# ```
#
# **What the papers claim, one manipulation each.** Lost in the Middle {cite}`liu2024lost`:
# a document in the middle of the context is read worse than one at the start, and asking
# the question before the documents as well (query-aware contextualization) barely changes
# multi-document QA. C-NORM {cite}`cnorm2025`: rewriting part of each passage with a chosen
# delimiter helps. TAG {cite}`pal2025tag`: XML tags with their definitions in the prompt
# help. Semantic competition {cite}`repantis2025competition`: what hurts is distractors that
# resemble the question, not their number, so far-ranked distractors hurt less than the
# retriever's top hits. Context length alone {cite}`du2025length`: filler between the
# evidence and the question hurts by itself.
#
# **What we test.** Each paper changes one thing with the rest fixed, so none can say
# which of these matters most for a given reader, or whether they add up. Here all six
# vary together on one task, 10-document NQ-Open QA, two levels each, in a 2^(6-1) half
# fraction (32 of the 64 combinations, defining relation I = ABCDEF: resolution VI, so
# every main effect and two-way interaction is estimable, aliased only with five- and
# four-way interactions, which we assume negligible). Every question is asked in all 32
# cells, so every comparison is paired within question. A main effect is the change in
# accuracy (points) from its low to its high level, averaged over the other five: per
# question, its mean over the 16 cells at the high level minus over the 16 at the low
# level, with a bootstrap interval over questions and an exact sign-flip p (the findings
# page's estimate and rule). A two-way interaction (how much one factor's effect changes
# between the levels of another) is estimated the same way from a per-question contrast.
# The tests come in named families, each with Holm-adjusted p beside the raw p: the six
# main effects, the fifteen interactions, and the six differences between two readers.
#
# All manipulations are `longctx.transforms` (see {doc}`../book/methods`), the same ones
# the other chapters use, so any other reader runs this chapter with one command:
#
# ```bash
# make run NB=notebooks/crossing.py MODEL=Qwen/Qwen2.5-1.5B-Instruct
# ```

# %% tags=["parameters", "hide-input"]
model = "qwen2.5-coder-0.5b-instruct"  # alias, .gguf path, checkpoint directory or hub id
scale = "book"  # a parameter set named in lib/longctx/scales/crossing.json
# The page also takes params, the set's overrides (e.g. {"num_questions": 48}), reader_options
# (how to reach the model), batch_size, token_budget and results_dir; each is explained
# in longctx.chapters.PAGE_PARAMETERS (`longctx run --help` lists them).
# A second reader whose stored rows answer the same prompts, shown beside this one.
second_reader = "qwen2.5-coder-1.5b-instruct"
second_backend = "llamacpp"

# %% tags=["remove-cell"]
page = setup("crossing", globals())

# %% [markdown]
# The prompts come from the chapter's `plan` (`longctx.chapters.crossing`), shared with
# `longctx reproduce`; stored rows are reused, and the model is loaded only for missing ones.

# %% tags=["hide-input"]
run = page.run((second_reader, second_backend), token_budget=65536)
view = page.analyze(run)

# %% tags=["remove-cell"]
page.show("figures")

# %% [markdown]
# ```{glue:md} fig-crossing-forest
# :format: myst
# ```

# %% tags=["remove-input"]
page.show("example")


# %% [markdown]
# (crossing-main)=
# ## Main effects against each paper's claim
#
# Each main effect compares the 16 cells at the factor's high level with the 16 at its low
# level, for the same questions. The verdict is the findings page's rule (see
# {ref}`findings`), so this table and that page print the same numbers and words. The one
# claim of no effect, query-aware contextualization, is judged by the equivalence margin
# of ±5 points fixed in the claims file: its whole interval must lie within it.

# %% tags=["hide-input"]
page.show("main effects")

# %% [markdown]
# **How n was chosen.** The book asks every question in all 32 cells, so each main effect
# is, per question, the mean over 16 cells minus the mean over the other 16. The size
# needed for a ±10-point interval follows from the spread of those per-question
# differences (n = (1.96 s / 10)², s their standard deviation), computed here from the run.
# Averaging over 16 cells per level makes each question's difference far less noisy than
# one 0/1 comparison, which is why two dozen questions can decide six effects at once.

# %% tags=["hide-input"]
page.show("sizing")

# %% [markdown]
# **Interactions.** The largest two-way interaction, drawn as accuracy at its four level
# combinations (averaged over the other four factors): parallel lines would mean the two
# manipulations simply add up.

# %% [markdown]
# ```{glue:md} fig-crossing-interaction
# :format: myst
# ```

# %% tags=["hide-input"]
page.show("interactions")

# %% [markdown]
# **What the fraction cannot separate.** Each estimate below is really the sum of the
# effect named and its alias; the design assumes the higher-order alias is zero.

# %% tags=["hide-input"]
page.show("aliases")

# %% [markdown]
# **Check with a logistic model.** The same design fitted by a logistic GEE (log odds
# ratios): the signs should agree with the main effects wherever their intervals exclude
# zero.

# %% tags=["hide-input"]
page.show("logit")

# %% [markdown]
# (crossing-readers)=
# ## A second reader
#
# Does what matters most depend on the reader? When a second reader (`second_reader`, by
# default Qwen2.5-Coder-1.5B-Instruct, three times this reader's size, run through llama.cpp:
# `second_backend`) has rows for the same prompts, its main effects are estimated the same
# way on the questions both readers answered in every cell, and the difference between the
# readers is paired by question (bootstrap interval over questions, sign-flip p).

# %% tags=["hide-input"]
page.show("readers")

# %% [markdown]
# ```{glue:md} fig-crossing-readers
# :format: myst
# ```

# %% tags=["remove-input"]
page.show("provenance")

# %% tags=["remove-input"]
page.show("downloads")

# %% [markdown]
# ## What we found
#
# With Qwen2.5-Coder-0.5B-Instruct on {glue:text}`x-questions` NQ-Open questions, each
# asked in all {glue:text}`x-cells` cells ({glue:text}`x-answers` answers,
# {glue:text}`x-accuracy` correct overall), every main effect has a 95% interval at most
# {glue:text}`x-max-half-width` points on each side:
#
# * **Position matters most, and in the paper's direction.** Moving the gold document from
#   first to the middle of ten changes accuracy by {glue:text}`x-position` points, averaged
#   over every combination of the other five manipulations ({glue:text}`x-position-verdict`).
#   Lost in the Middle reports -15.6 for GPT-3.5-Turbo at 10 documents; this is the one
#   claim the rule calls reproduced across the crossing for this reader
#   ({glue:text}`crossing-position-state`).
# * **Which distractors compete comes next.** Far-ranked distractors instead of BM25's top
#   hits: {glue:text}`x-distractors` points, the semantic-competition direction; the
#   interval just clears zero, but the exact test does not agree
#   ({glue:text}`x-distractors-p`), so no direction is called
#   ({glue:text}`x-distractors-verdict`).
# * **C-NORM, tags and filler do little here.** C-NORM {glue:text}`x-format`, spaCy tags
#   with definitions {glue:text}`x-tags`, {glue:text}`x-filler-tokens` whitespace tokens
#   {glue:text}`x-filler`. None is decided by the rule: C-NORM's interval ends at zero and
#   its exact test does not call a direction ({glue:text}`x-format-p`). C-NORM and tags
#   lean the way their own chapters found for this reader (both hurt there, with larger n
#   and longer contexts), not the papers' way. The filler level is small (1,000 tokens,
#   doubling a ~1K-token prompt, chosen for the CPU); the length-alone chapter's 16K
#   fillers are where length shows.
# * **Query-aware contextualization:** {glue:text}`x-query_aware`. Lost in the Middle
#   reports little effect on multi-document QA. Our interval is wider than the ±5-point
#   margin fixed for this claim, so it shows neither the absence of an effect nor an
#   effect: {glue:text}`x-query_aware-verdict`.
# * **No interaction is resolved.** {glue:text}`x-interactions-significant` of
#   {glue:text}`x-interactions` interactions has a raw p below 0.05, and
#   {glue:text}`x-interactions-holm` survives Holm's adjustment over the fifteen. The
#   largest, {glue:text}`x-top-interaction` ({glue:text}`x-top-interaction-ci`,
#   {glue:text}`x-top-interaction-p`), was picked after looking: a lead for a run sized
#   for it, not a finding. The logistic fit {glue:text}`x-logit-agrees` in sign with every
#   main effect.
#
# For a practitioner with this reader: put the answer-bearing document first, the largest
# effect here ({glue:text}`x-position-p`). Whether less similar distractors
# help is not settled at this n ({glue:text}`x-distractors-p`), and reformatting, tagging
# or padding the context showed no gain.
#
# **The ranking depends on the reader.** The same prompts answered by
# Qwen2.5-Coder-1.5B-Instruct (three times the size, through llama.cpp; {ref}`crossing-readers`
# has the table and the figure), {glue:text}`x2-shared` questions paired between the readers:
#
# * **The larger reader is right more often**: {glue:text}`x2-accuracy` of its
#   {glue:text}`x2-answers` answers against {glue:text}`x-accuracy`.
# * **Position nearly stops mattering.** Moving the gold document to the middle changes the
#   1.5B reader's accuracy by {glue:text}`x2-position` against {glue:text}`x-position` for
#   the 0.5B. The readers' difference is {glue:text}`x2-diff-position`
#   ({glue:text}`x2-diff-position-p`): the largest of the six, but not decided once the
#   family is adjusted. Lost in the Middle finds the U-shape in much larger models, so at
#   most this hints that at 10 short documents the 1.5B reader reads the middle almost as
#   well as the start.
# * **Which distractors compete is the 1.5B's largest effect**: far-ranked instead of
#   BM25's top hits, {glue:text}`x2-distractors` ({glue:text}`x2-distractors-p`, not
#   decided after adjustment), against {glue:text}`x-distractors` for the 0.5B
#   (difference {glue:text}`x2-diff-distractors`).
# * **C-NORM, tags, filler and query-aware stay small** (within ±{glue:text}`x2-rest-max`
#   points for the 1.5B reader), and so do their differences between the readers.
# * **Its largest interaction** is {glue:text}`x2-top-interaction`
#   ({glue:text}`x2-top-interaction-ci`); {glue:text}`x2-interactions-significant` of
#   fifteen has a raw p below 0.05 and {glue:text}`x2-interactions-holm` survives Holm's
#   adjustment.
# * **Sizes.** Each of the 1.5B reader's main effects has a 95% interval at most
#   {glue:text}`x2-max-half-width` points on each side; the differences between readers are
#   wider (up to ±{glue:text}`x2-diff-max-half-width` points, for
#   {glue:text}`x2-diff-widest`), so a difference between readers smaller than that is not
#   resolved at this n.
#
# For a practitioner with the 0.5B, put the answer-bearing document first. On the other
# models, by the findings page's rule (both backends of a model must agree, and a verdict
# must hold in most resamples of the questions): {glue:text}`crossing-readers`
#
# **What differs from the papers.** One task (10-document NQ-Open) for all six claims,
# where four papers measured theirs on other tasks and lengths (needles, SQuAD snippets,
# GSM8K with 15K-token fillers): the findings page gives those rows no paper size. The
# weights are the Q4_K_M GGUF files; the 0.5B is read through transformers (dequantized,
# bfloat16) and the 1.5B through llama.cpp (4-bit), so the reader comparison is also a
# backend comparison (the backends page measures that difference for the 0.5B). The chat
# template adds Qwen's default system prompt to every prompt. **How n was chosen:** 24
# questions, each in all 32 cells: what the CPU budget allows, with the interval that 24
# questions give for each effect shown in the table above.
#
# **How the rows were made.** The 1.5B reader's run stores one question (32 prompts) at a
# time and resumes where it stopped:
#
# ```bash
# longctx reproduce --chapters crossing --scale book --model qwen2.5-coder-1.5b-instruct --backend llamacpp
# ```
#
# Its rows were made on two machines (an AMD EPYC and an Intel Xeon, 2 cores each), with
# llama.cpp built for each CPU. Greedy decoding can round differently on another CPU, so a
# seeded sample of the first machine's rows was answered again on the second
# (`longctx replay`; `data/bench/replay-crossing-1.5b-llamacpp.json`):

# %% tags=["hide-input"]
page.show("replay")

# %% [markdown]
# The summary below is computed from the stored rows, so it stays true for any
# `second_reader`:

# %% tags=["hide-input"]
page.show("readers summary")

# %% [markdown]
# The paper scale (20 documents, 8,000 filler tokens, all 64 cells, 200 questions) needs a
# GPU: `--scale paper`.

# %% tags=["remove-cell"]
page.finish()  # every statement still holds; every result consistent
