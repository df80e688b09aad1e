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
# # What rescues the middle? Each fix against a random shuffle
#
# ```{glue:md} mitigations-verdicts
# :format: myst
# ```
#
# {glue:text}`mit-against-shuffle`
#
# **The question.** Lost in the Middle {cite}`liu2024lost` found that readers use a document
# with the answer less when it sits in the middle of the context. Several training-free fixes
# have been proposed since, each judged on its own task against its own baseline. Cuconasu
# et al. {cite}`cuconasu2025positional` point out that any fix that re-orders the documents
# must beat a *random shuffle* of the same documents, or the order it chose did nothing a
# coin could not. Here every fix runs on one task, for every reader, paired by question with
# the baseline and with that shuffle.
#
# **What we test.** Lost in the Middle's multi-document QA: {glue:text}`mit-documents`
# documents (the NQ-Open gold chunk among BM25-ranked distractors), the gold first, in the
# middle and last, the multi-document chapter's first {glue:text}`mit-questions` questions.
# The arms judged here: {glue:text}`mit-arms`. {glue:text}`mit-pending`

# %% tags=["parameters", "hide-input"]
model = "qwen2.5-coder-0.5b-instruct"  # alias, .gguf path, checkpoint directory or hub id
scale = "book"  # a parameter set named in lib/longctx/scales/mitigations.json
# The page also takes params, the set's overrides (e.g. {"arms": ["shuffle", "ms_poe"]}),
# reader_options, batch_size, token_budget and results_dir; each is explained in
# longctx.chapters.PAGE_PARAMETERS (`longctx run --help` lists them).

# %% tags=["remove-cell"]
page = setup("mitigations", globals())

# %% [markdown]
# Every prompt comes from the chapter's `plan` (`longctx.chapters.mitigations`), which
# `longctx reproduce` also calls, so a run elsewhere stores exactly the rows this page reads.
# The baseline and query-aware prompts are the multi-document chapter's own, so their rows are
# shared with it.

# %% tags=["hide-input"]
run = page.run(record=("num_questions", "num_documents", "seed"))
view = page.analyze(run)

# %% [markdown]
# (mit-headline)=
# ## Gains in the middle, per reader
#
# Each fix's gain with the gold in the middle over the baseline (the paper's prompt, documents
# in the retriever's order) and over the random shuffle of the same documents. A direction
# counts only where the 95% interval and the Holm-adjusted exact test agree; the verdicts
# above judge each gain against its paper's report, with a premise that the baseline leaves
# room in the middle and that the fix does not cost the edges more than 5 points.

# %% tags=["remove-input"]
page.show("gains")

# %% [markdown]
# ## Accuracy by gold position, every arm
#
# The key figure: where the gold stood in the baseline prompt, and how often each arm's
# reader answered. An arm that moves the documents (the shuffle, the reorder, the attention
# sorts) is drawn at the gold's position *before* it moved them, so a line that stays flat
# across the positions has rescued the middle.

# %% tags=["remove-cell"]
page.show("figure")

# %% [markdown]
# ```{glue:md} fig-mitigations-position
# :format: myst
# ```

# %% tags=["remove-input"]
page.show("provenance")

# %% [markdown]
# ## How each fix is built, and where ours differs from its paper
#
# - **Random shuffle** {cite}`cuconasu2025positional`: the same documents in an order drawn
#   per question from a seed, so any machine draws the same order. **Reorder** (LangChain's
#   `LongContextReorder`, Haystack's `LostInTheMiddleRanker`): the documents by BM25 score
#   against the question, the best at both ends and the worst in the middle; it does not
#   depend on where the gold stood, so one prompt per question serves every position.
# - **Attention instruction** {cite}`zhang2024instruction`: the baseline prompt with a
#   sentence asking the reader to read every document, including those in the middle
#   (`lib/longctx/prompts/attention_instruction.prompt`).
# - **Query-aware contextualization** (Lost in the Middle, section 4.2): the question before
#   and after the documents, the multi-document chapter's own prompts.
# - **Ms-PoE** {cite}`zhang2024mspoe`: position indices rescaled per attention head,
#   ratios from {glue:text}`mit-ms-poe-ratios` assigned by each head's position-awareness, on
#   the transformers backend. The paper's readers give every query head its own key head;
#   ours share one key head among several query heads (grouped-query attention), so the
#   ratio is chosen per key head, from the query heads it serves, and those query heads read
#   with it: a query and a key rotated by different ratios would meet by their absolute
#   positions instead of their distance, which left a reader repeating itself.
# - **Found in the Middle** {cite}`hsieh2024found`: the final token's attention to each document
#   in the last {glue:text}`mit-layers` layers, minus the attention an irrelevant document gets
#   at that position (measured on {glue:text}`mit-calibration` prompts of distractors only);
#   the best calibrated document goes to the edge this reader's baseline reads best
#   ({glue:text}`mit-edge` for the default reader). The paper reads the last 16 of 32 layers.
# - **Attention sorting** {cite}`peysakhovich2023sorting`: the documents ordered by the final
#   token's attention, the most attended last, once or three times before answering.
# - **Recite, then answer** {cite}`du2025length`: the reader first copies the documents it
#   finds relevant, then answers with only those as its search results. Whether the copy kept
#   the answer tells the two steps apart (the distractors hold no answer):
#   {glue:text}`mit-recitation`
#
# The readers here are far smaller than the papers' (7B and more), and every answer is
# greedy, so each gain says what the fix does for a small reader, not what its paper measured.
#
# **Cost.** {glue:text}`mit-cost`

# %% [markdown]
# ## A worked example
#
# A prompt of the random shuffle with the gold document in the middle of the baseline, and
# the reader's answers; the link opens every row of the chapter's store in the sample
# browser.

# %% tags=["remove-input"]
page.show("example")

# %% tags=["remove-input"]
page.show("downloads")

# %% tags=["remove-cell"]
page.finish()
