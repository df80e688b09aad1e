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
# # Context length alone: essay, whitespace and masked padding
#
# ```{glue:md} length_alone-verdicts
# :format: myst
# ```
#
# **What the paper claims.** Du et al. {cite}`du2025length` (*Context Length Alone Hurts LLM
# Performance Despite Perfect Retrieval*) split short problems into evidence and question and push
# them apart with filler. Accuracy falls with length even when the filler is essay text
# (Table 6), minimally distracting whitespace (Table 7), or masked so that the model
# attends only to evidence and question (Table 3), and also when the filler goes *before*
# the evidence so that the question stays next to it (Table 8): length alone hurts.
#
# **What we test.** The same construction (`longctx.tasks.length_alone`, `longctx.padding`)
# on GSM8K, the task where our reader has accuracy to lose, with
# {glue:text}`la-problems` problems at 0 and {glue:text}`la-filler` filler tokens (the
# paper: 15,000), paired problem by problem:
#
# * essay, whitespace and masked filler between evidence and question (the paper's design);
# * whitespace before the evidence, question adjacent to it (Table 8);
# * two constructions of "whitespace" (what a whitespace token is turns out to matter);
# * GSM8K without the last step of its worked solution, to see whether the task needs
#   reasoning at all in the paper's design;
# * VarSum (the paper's synthetic sums) with a budget that does not cut answers off:
#   {glue:text}`la-varsum-n` problems without filler, {glue:text}`la-varsum-long-n` with
#   {glue:text}`la-filler` essay tokens;
# * the paper's remedy, recite-then-answer, on RULER's QA1 and QA2 at
#   {glue:text}`la-ruler-length` tokens (Table 5), {glue:text}`la-qa1-questions` and
#   {glue:text}`la-qa2-questions` questions, with a variant that separates choosing
#   documents from copying them.
#
# Filler is measured in the reader's own tokens; masking is done without computing the
# masked tokens (positions after the gap are shifted; equivalence with an explicit
# attention mask is a unit test). The rows were generated with bfloat16 transformers, the
# GSM8K rows on a GPU and the VarSum and RULER rows on a CPU, all by `longctx reproduce`,
# which builds the same requests as this notebook.
#
# **What differs.** One small reader, Qwen2.5-Coder-0.5B-Instruct (the paper's are 7-8B,
# and GPT-4o for RULER), two lengths, {glue:text}`la-problems` of GSM8K's 1,319 test
# problems, and RULER's questions at its shortest length only. The weights are the Q4_K_M GGUF file,
# dequantized for transformers, and the chat template adds Qwen's default system prompt.
# GSM8K's evidence holds the worked solution (the paper's "chain-of-thought steps"), so
# for this reader the task mostly measures carrying a stated number to the answer: without
# the solution's final step its accuracy falls to the floor (the no-final-step section).
# Each claim is judged with a premise, and its magnitude is stated beside its direction.
# For the three claims with filler between evidence and question the premise is the
# paper's own (its Section 3.2, "despite perfect retrieval"): the reader solves the short
# problem, and with the filler in place at the long length it recites the evidence and the
# question word for word for at least as many problems as the paper's weakest GSM8K
# recitation ({ref}`la-premise`). A reader that cannot find its evidence may lose accuracy
# for that reason alone; only one that can find it shows that length alone hurts.

# %% tags=["parameters", "hide-input"]
model = "qwen2.5-coder-0.5b-instruct"  # alias, .gguf path, checkpoint directory or hub id
scale = "book"  # a parameter set named in lib/longctx/scales/length_alone.json
# The page also takes params, the set's overrides (e.g. {"num_problems": 40}), reader_options
# (how to reach the model), batch_size, token_budget and results_dir; each is explained
# in longctx.chapters.PAGE_PARAMETERS (`longctx run --help` lists them).

# %% tags=["remove-cell"]
page = setup("length_alone", globals())

# %% [markdown]
# The prompts come from the chapter's `plan` (`longctx.chapters.length_alone`), shared with
# `longctx reproduce`; rows already stored are reused and only missing ones generated.

# %% tags=["hide-input"]
run = page.run(token_budget=262144)
view = page.analyze(run)

# %% tags=["remove-cell"]
page.show("figures")

# %% [markdown]
# ```{glue:md} fig-la-gsm8k
# :format: myst
# ```

# %% tags=["remove-input"]
page.show("example")


# %% tags=["remove-input"]
# Its own cell: a second output in the figure cell would be labelled as the figure again.
page.show("provenance")

# %% [markdown]
# {numref}`fig-la-gsm8k` holds the chapter's findings. Filler between evidence and question
# costs this reader {glue:text}`la-between-loss-range` points; the same whitespace *before* the evidence costs
# nothing; and without the last step of the worked solution the reader solves almost no
# problem even with no filler at all.
#
# (la-headline)=
# ## Filler between evidence and question (Tables 6, 7 and 3)
#
# The change from the short problem at {glue:text}`la-filler` tokens, paired by problem:
# 95% bootstrap interval over problems and a sign-flip p. Beside it, the paper's GSM8K
# drops at 15,000 tokens.

# %% tags=["hide-input"]
page.show("between")

# %% [markdown]
# **How n was chosen.** From the observed per-problem differences, the problems needed for
# a 95% interval of at most 10 points on each side (the paired design needs fewer the fewer
# problems change):

# %% tags=["hide-input"]
page.show("sizing")

# %% [markdown]
# (la-premise)=
# ### The paper's premise: recitation with the filler in place
#
# The paper's claim is that accuracy falls *despite perfect retrieval*. It measures
# retrieval by asking for a recitation: the same prompt, but the model must first copy the
# problem description, the worked solution and the question word for word, scored by exact
# match (its Appendix prompts, Figure 7 for GSM8K). Its models recite GSM8K nearly as well
# at 15,000 essay tokens as at none (Table 6). We ask our reader for the same recitation on
# the same {glue:text}`la-problems` problems with each filler in place at
# {glue:text}`la-filler` tokens. Beside the paper's absolute threshold the premise asks two
# things of the reader's own recitations, paired by problem: that it recites without filler
# at the same rate (a reader that cannot is untestable here, whatever length does), and that
# of the problems it recites without filler it still recites as many with the filler in
# place (so what is tested is length alone). A claim is judged once its recitations decide
# the check: all of them stored, or so many already differing that the rest could not lift
# the rate to the paper's:

# %% tags=["hide-input"]
page.show("premise")

# %% tags=["remove-input"]
page.show("premise state")

# %% [markdown]
# (la-placement)=
# ## Evidence next to the question (Table 8)
#
# Filler between evidence and question changes two things at once: the input gets longer
# and the question moves away from its evidence. The paper separates them by putting the
# whitespace *before* the evidence. Paired on the same problems:

# %% tags=["hide-input"]
page.show("placement")

# %% [markdown]
# With the question next to its evidence, {glue:text}`la-filler` tokens of whitespace cost
# this reader nothing; the same whitespace between them costs
# {glue:text}`la-between-loss-whitespace` points. For this reader and task the loss follows
# the distance between evidence and question, not the length of the input. The paper's
# 7-8B models lost 8-9 points in this placement; we rule out a loss that large. One task,
# one filler kind and one reader: it is a finding about this setting, not a general law.
#
# ## What is a whitespace token?
#
# BPE tokenizers merge runs of spaces, so "16,000 whitespace tokens" has no single meaning.
# The paper does not say which it used. Our `whitespace` filler repeats the longest run of
# spaces that the tokenizer reads as one token each time; for Qwen2.5 (and SmolLM2) that is
# a run of 128 spaces, so 16,000 tokens are about two million spaces held in one rare
# token. The alternative, the tokenizer's single-space (or newline) token repeated 16,000
# times, cannot be written as text (it would merge), so the engine splices the token ids
# directly.

# %% tags=["hide-input"]
page.show("whitespace units")

# %% [markdown]
# Sixteen thousand single-space or newline tokens break this reader: it answers none of
# the problems. After single spaces it still answers in the asked format, but with a
# wrong number; after newlines it mostly writes whitespace, markup or unrelated code until
# the token cap. The 128-space unit leaves it at {glue:text}`la-whitespace-pct`. Which
# whitespace a study uses is not a detail: here it is the difference between a large drop
# and a collapse.
#
# ## Does the task need reasoning?
#
# In the paper's design the evidence holds the problem *and its worked solution*, whose last
# line usually states the result, so a model can score by carrying that number across the
# filler. Removing the last step leaves the reader something to compute:

# %% tags=["hide-input"]
page.show("no final step")

# %% [markdown]
# Without the final step this reader is right on {glue:text}`la-no-step-correct` of
# {glue:text}`la-problems` problems even with no filler, with a
# {glue:text}`la-no-step-cap`-token budget for working it out
# ({glue:text}`la-no-step-at-cap` of its {glue:text}`la-no-step-rows` outputs, with and
# without filler, still reach that cap). The outputs that had reached an earlier 192-token
# cap were generated again with this budget, on a CPU in bfloat16; the others stopped
# before 192 tokens, where greedy decoding gives the same text under any larger budget, and
# keep their GPU generation (their rows record the budget they were made with).
# With the step it copies the stated result and is right on
# {glue:text}`la-short-correct`. So, for this reader, GSM8K in the paper's design measures
# whether a number survives the trip across the filler, not reasoning over long inputs;
# the paper's larger models may well reason, but the design cannot tell the two apart.
#
# (la-varsum)=
# ## VarSum with room to finish
#
# VarSum is the paper's synthetic arithmetic task: fifty variables `x_i = n`, and the
# question asks for the sum of three of them, so the evidence must be read, not copied.
# Its budget is {glue:text}`la-varsum-cap` tokens. Whether that is enough is measured, not
# assumed: the table gives the longest output and the longest *correct* output against the
# cap. All problems run with no filler; the first {glue:text}`la-varsum-long-n` also with
# {glue:text}`la-filler` essay tokens between evidence and question (a 16K prompt takes
# about four minutes on a 2-core CPU, and the reader turns out to be at the floor, so more
# problems would not change the verdict).

# %% tags=["hide-input"]
page.show("varsum")

# %% [markdown]
# With no filler no output reaches the cap: the longest has
# {glue:text}`la-varsum-longest` tokens and the longest correct one
# {glue:text}`la-varsum-longest-correct`, so the budget does not decide any score (with
# essay filler {glue:text}`la-varsum-long-at-cap` of {glue:text}`la-varsum-long-n`
# outputs run to the cap, listing `x_46, x_45, x_44, ...` in a loop that no budget would
# end). What decides the scores is the reader. With no filler it gets
# {glue:text}`la-varsum-right` of {glue:text}`la-varsum-n` sums right
# ({glue:text}`la-varsum-pct`). It does write a step-by-step solution, but with the wrong
# numbers: of the {glue:text}`la-varsum-stated` values it states for the variables the
# question asks about, {glue:text}`la-varsum-stated-right`
# ({glue:text}`la-varsum-stated-share`) are the values in the evidence. The paper's 7-8B
# readers start at 68-96% and lose 47-60 points at 15K. From that floor no drop of that
# size can happen: with essay filler the reader solves {glue:text}`la-varsum-long-right`
# of {glue:text}`la-varsum-long-n` problems ({glue:text}`la-varsum-drop`). **VarSum cannot
# measure a length effect for this reader**; it needs a reader that solves the short
# problem (the 1.5B model, on a GPU, at the `full` scale).
#
# (la-ruler)=
# ## RULER QA1 and QA2: recite, then answer (Table 5)
#
# The paper's remedy for length alone is to make the input short again: the model first
# recites the documents that matter (its Figure 12 prompt: copy them "WORD BY WORD" under
# `# Document <n>` headers), then answers RULER's own prompt with only the recitation as
# context. On RULER's QA1 (SQuAD) and QA2 (HotpotQA) this lifts GPT-4o by up to 4 points
# (Table 5; at 4K tokens 90.4% to 92.2% on QA1 and 71.2% to 73.2% on QA2). The paper adds
# that it left open models out because "the failure of retrieval directly causes a
# performance drop", so for a 0.5B reader the question is which way the difference goes,
# and why.
#
# We build RULER's QA tasks as RULER does (`longctx.tasks.ruler_qa`: its document pools,
# its prompt, contexts filled to the target length in the reader's own tokens, its
# `string_match_part` metric) at 4,000 tokens, the paper's shortest length, on the same
# seeded questions in every arm. Besides the paper's two steps we add a third arm that
# separates *choosing* from *copying*: the pipeline takes the document numbers the
# recitation names and pastes those documents verbatim, so a reader that picks the right
# document but cannot copy it still gets its text.

# %% [markdown]
# ```{glue:md} fig-la-ruler
# :format: myst
# ```

# %% tags=["remove-input"]
# Its own cell: a second output in the figure cell would be labelled as the figure again.
page.show("ruler provenance")

# %% [markdown]
# In {numref}`fig-la-ruler` both second steps lose to RULER's prompt over the whole context, on both tasks. The
# paired changes, with Table 5's GPT-4o numbers at the same length:

# %% tags=["hide-input"]
page.show("ruler steps")

# %% [markdown]
# **Why.** The paper's method assumes the recitation retrieves: it points the second step
# at the evidence. Each claim's premise counts a recitation as retrieving when it
# *identifies* a document that holds the answer: it copies a line of one (20 characters
# or more, verbatim), or names one by its number (the second step can then read it); at
# least half of the recitations must. Writing text under a header is not enough: the text
# or the number must belong to a document with the answer. The findings page marks the
# cells this rule judged after their rows were made ({ref}`findings`). The table below
# scores the recitations themselves: whether they name (by number) a document that holds
# the answer, whether any line is copied verbatim from the context, from a document
# holding the answer, either of the two (the premise), and whether a gold answer appears
# at all. Below it, how n was chosen: the questions each comparison needs for ±10 points.

# %% tags=["hide-input"]
page.show("ruler recitation")

# %% [markdown]
# The recitations are short (a median of {glue:text}`la-qa1-tokens` tokens on QA1,
# {glue:text}`la-qa2-tokens` on QA2; {glue:text}`la-recitations-at-cap` of
# {glue:text}`la-recitations` run to the {glue:text}`la-recite-cap`-token cap): often a
# bare header, a paraphrase of one sentence, or a copied sentence under a wrong number.
# Only {glue:text}`la-qa1-copied` (QA1) and {glue:text}`la-qa2-copied` (QA2) copy a line
# of a document that holds the answer, {glue:text}`la-qa1-supporting` and
# {glue:text}`la-qa2-supporting` name one, and {glue:text}`la-qa1-identified` and
# {glue:text}`la-qa2-identified` do either, so pasting the named documents verbatim does worse
# still ({glue:text}`la-qa1-named` and {glue:text}`la-qa2-named`): the reader's numbers
# are unreliable even where its text is right. The paper's second step keeps whatever text
# the reader wrote, and a gold answer is in {glue:text}`la-qa1-answer-in` (QA1) and
# {glue:text}`la-qa2-answer-in` (QA2) of recitations, which bounds what it can reach.
# **Verdict:** for a 0.5B reader, recite-then-answer changes QA1 by
# {glue:text}`la-ruler-qa1` and QA2 by {glue:text}`la-ruler-qa2`, where GPT-4o gained 1.8
# and 2.0. The paper's remedy assumes the recitation retrieves the evidence, and for this
# reader it rarely does, so the findings page marks both claims' premise as not met
# rather than calling them opposite ({ref}`findings`): the remedy needs a reader that
# can retrieve, as the paper itself says.
#
# ## Not run yet: MMLU, HumanEval, their recitations and retrieve-then-solve
#
# The paper's MMLU and HumanEval, their recitation prompts and retrieve-then-solve
# (Table 4) are implemented and tested at CI scale, with budgets that leave room for a whole
# answer (HumanEval 768, recitation 1,024 tokens); of the recitations only GSM8K's, the
# premise above, are run. Their 16K rows need a GPU (the `full` scale):
#
# ```bash
# longctx reproduce --chapters length_alone --scale full --batch-size 64 --token-budget 524288
# ```

# %% tags=["remove-input"]
page.show("downloads")

# %% [markdown]
# ## What we found
#
# *Computed from the rows this page was built from (`data/results/<reader>/length_alone/`,
# {glue:text}`la-rows` generations, and `ruler_qa/`, {glue:text}`la-ruler-rows`) by
# `longctx.chapters.length_alone`, the functions the findings page reads.*
#
# * **Filler between evidence and question lowers accuracy, in the paper's direction and by
#   more.** GSM8K
#   accuracy falls from {glue:text}`la-short-pct` to {glue:text}`la-essay-pct` with essay
#   filler ({glue:text}`la-essay`), {glue:text}`la-whitespace-pct` with whitespace
#   ({glue:text}`la-whitespace`) and {glue:text}`la-mask-pct` with the filler masked
#   ({glue:text}`la-mask`). The paper's 7-8B models lost 3-29 points at 15K (Llama-3-8B:
#   9.0, 3.2 and 4.3; Mistral-7B: 28.9, 24.0 and 8.2), so ours is
#   {glue:text}`la-times-papers` ({ref}`findings` gives each ratio). For this
#   reader masking hurts most: what remains when nothing is there to distract is the
#   distance in positions. Whether the cause is length *alone* is the paper's premise:
#   that the reader still recites its evidence word for word at that length
#   ({ref}`la-premise`); each of the three claims is judged only with it.
#   {glue:text}`la-premise-outcome`
# * **With the question next to its evidence, length costs nothing.** Whitespace before the
#   evidence: {glue:text}`la-before-pct` ({glue:text}`la-before`); the paper's models lost
#   8-9 points, which our interval rules out ({ref}`findings`: not reproduced). Before
#   minus between: {glue:text}`la-before-minus-between` points. For this reader and task
#   the loss follows evidence-question distance.
# * **"Whitespace" must be specified.** Single-space or newline tokens drive accuracy to
#   {glue:text}`la-token-level-pct` (wrong numbers after spaces, unrelated text after
#   newlines); 128-space tokens leave {glue:text}`la-whitespace-pct`.
# * **The paper's GSM8K design barely needs reasoning from this reader.** Without the final
#   step of the worked solution it scores {glue:text}`la-no-step-pct` with no filler,
#   against {glue:text}`la-short-pct` with it.
# * **VarSum is at the floor for this reader, so it says nothing about length.** With a
#   {glue:text}`la-varsum-cap`-token budget that no correct output approaches (longest
#   {glue:text}`la-varsum-longest-correct` tokens), it solves {glue:text}`la-varsum-right`
#   of {glue:text}`la-varsum-n` short problems ({glue:text}`la-varsum-pct`) and
#   {glue:text}`la-varsum-long-right` of {glue:text}`la-varsum-long-n` with essay filler;
#   only {glue:text}`la-varsum-stated-share` of the values it writes down are the ones in
#   the evidence.
# * **Recite-then-answer needs a reader that retrieves.** On RULER QA1 and QA2 at 4K tokens
#   the paper's two steps change this reader's score by {glue:text}`la-ruler-qa1` and
#   {glue:text}`la-ruler-qa2`, where GPT-4o gained about 2: only
#   {glue:text}`la-qa1-identified` and {glue:text}`la-qa2-identified` of its recitations
#   copy or name a document that holds the answer, so the paper's premise (the recitation
#   retrieves) fails and the findings page does not count these as tests of the claim.

# %% tags=["remove-cell"]
# The prose reads its numbers from the glue above; on the committed run, check its words too.
page.finish()  # every statement still holds; every result consistent
