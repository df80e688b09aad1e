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
# # Context length alone: essay, whitespace and masked padding
#
# **What the paper claims.** Du et al. (2025, *Context Length Alone Hurts LLM Performance
# Despite Perfect Retrieval*) split short problems into evidence and question and push
# them apart with filler. Accuracy falls with length even when the filler is essay text
# (Table 6), minimally distracting whitespace (Table 7), or masked so that the model
# attends only to evidence and question (Table 3), and also when the filler goes *before*
# the evidence so that the question stays next to it (Table 8): length alone hurts.
#
# **What we test.** The same construction (`longctx.tasks.length_alone`, `longctx.padding`)
# on GSM8K, the task where our reader has accuracy to lose, with 120 problems at 0 and
# 16,000 filler tokens (the paper: 15,000), paired problem by problem:
#
# * essay, whitespace and masked filler between evidence and question (the paper's design);
# * whitespace before the evidence, question adjacent to it (Table 8);
# * two constructions of "whitespace" (what a whitespace token is turns out to matter);
# * GSM8K without the last step of its worked solution, to see whether the task needs
#   reasoning at all in the paper's design;
# * VarSum (the paper's synthetic sums) with a budget that no longer cuts answers off:
#   120 problems without filler, 16 with 16,000 essay tokens;
# * the paper's remedy, recite-then-answer, on RULER's QA1 and QA2 at 4,000 tokens (Table 5),
#   110 questions each, with a variant that separates choosing documents from copying them.
#
# Filler is measured in the reader's own tokens; masking is done without computing the
# masked tokens (positions after the gap are shifted; equivalence with an explicit
# attention mask is a unit test). The GSM8K rows were generated on a lent H100 (bfloat16),
# the VarSum and RULER rows on this project's 2-core CPU (bfloat16), all by `longctx
# reproduce`, which builds the same requests as this notebook.
#
# **What differs.** One small reader, Qwen2.5-Coder-0.5B-Instruct (the paper's are 7-8B,
# and GPT-4o for RULER), two lengths, 120 of GSM8K's 1,319 test problems, 110 of RULER's
# questions per task at its shortest length.

# %% tags=["parameters", "hide-input"]
model = "qwen2.5-coder-0.5b-instruct"  # alias, .gguf path, checkpoint directory or hub id
num_problems = 120  # seeded problems per task (prefix-stable: a larger run reuses these)
seed = 0
retrieve_then_solve = True  # second short prompt from each recitation (Table 4), for recite arms
# Each arm: subtasks solved (or recited, mode "recite") with some filler kinds at some lengths,
# one placement ("between" evidence and question, or "before" the evidence). Kinds: essay,
# whitespace (the tokenizer's whitespace unit), space_tokens, newline_tokens, mask.
arms = [
    {"subtasks": ["gsm8k"], "kinds": ["essay", "whitespace", "mask"], "lengths": [0, 16000], "headline": True},
    {"subtasks": ["gsm8k"], "kinds": ["whitespace"], "lengths": [16000], "placement": "before", "headline": True},
    {"subtasks": ["gsm8k"], "kinds": ["space_tokens", "newline_tokens"], "lengths": [16000], "headline": True},
    {"subtasks": ["gsm8k_no_final_step"], "kinds": ["essay", "whitespace", "mask"], "lengths": [0, 16000],
     "headline": True},
    # VarSum with its 512-token budget: all problems short, the first 16 with 16K essay tokens (CPU-sized: it is at the floor).
    {"subtasks": ["varsum"], "kinds": ["essay"], "lengths": [0]},
    {"subtasks": ["varsum"], "kinds": ["essay"], "lengths": [16000], "num_problems": 16},
]
# RULER QA1 (SQuAD) / QA2 (HotpotQA), Table 5; contexts are sized in the reader's tokens. None: not run.
ruler = {"subtasks": ["qa1", "qa2"], "lengths": [4000], "num_questions": 110}
device = "auto"
backend = "hf"  # hf (transformers), llamacpp (the GGUF file in llama.cpp) or openai (a server)
backend_url = None  # the server of the openai backend, e.g. http://127.0.0.1:8000/v1
dtype = "auto"
batch_size = 8
token_budget = 262144  # rows x prompt tokens per batch, so long prompts get smaller batches
results_dir = "data/results"
experiment = "length_alone"

# %% tags=["remove-cell"]
import warnings

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from longctx.chapters import length_alone as chapter
from longctx.metrics import summarize
from longctx.backends import load_backend, spec
from longctx.paths import repo_root, resolve
from longctx.plots import condition_bars
from longctx.report import n_for_half_width, pct_ci, points_ci, show
from longctx.reproduce import run_blocks, stored_rows
from longctx.results import provenance, rows_table
from longctx.tasks import length_alone as la
from longctx.tasks import ruler_qa as rq

warnings.filterwarnings("ignore", category=FutureWarning)
results_path = resolve(results_dir)
backend_spec = spec(backend, backend_url)
paper = pd.read_csv(repo_root() / "data" / "paper" / "length_alone.csv")
params = dict(num_problems=num_problems, seed=seed, retrieve_then_solve=retrieve_then_solve, arms=arms, ruler=ruler,
              model=model)

# %% [markdown]
# The chapter's prompts come from `longctx.chapters.length_alone.plan`, shared with
# `longctx reproduce`; rows already stored are reused and only missing ones generated.

# %%
blocks = chapter.plan(params)
run_blocks(blocks, model=model, results_dir=results_path, batch_size=batch_size, token_budget=token_budget,
           backend=backend_spec, load=lambda: load_backend(model, backend_spec, device=device, dtype=dtype),
           progress=True, log=lambda message: None)
problems = [p for ps in chapter.problems_for(params).values() for p in ps]
stored = stored_rows(blocks, model=model, results_dir=results_path, backend=backend_spec)
rows = [r for r in stored if r["task"] == la.TASK]
ruler_rows = [r for r in stored if r["task"] == rq.TASK]
scored = pd.DataFrame(la.score_rows(rows, problems))
scored["problem"] = scored["example_id"].str.replace(":no-final-step", "", regex=False)

# %% tags=["remove-cell"]
LABELS = {("none", "none"): "no filler", ("essay", "between"): "essay", ("whitespace", "between"): "whitespace",
          ("mask", "between"): "masked", ("whitespace", "before"): "whitespace, before the evidence",
          ("space_tokens", "between"): "single-space tokens", ("newline_tokens", "between"): "newline tokens"}
solve = scored[scored["mode"] == "solve"].copy()
solve["condition"] = [LABELS[(f, p)] for f, p in zip(solve["filler"], solve["placement"])]
solve["variant"] = solve["subtask"].map({"gsm8k": "GSM8K (paper's design)",
                                         "gsm8k_no_final_step": "GSM8K without the final step"})
bars = summarize(solve[solve["subtask"].str.startswith("gsm8k")], ["variant", "condition"])
order = ["no filler", "essay", "whitespace", "single-space tokens", "newline tokens", "masked",
         "whitespace, before the evidence"]

# %% tags=["hide-input"] mystnb={"figure": {"caption": "GSM8K accuracy of Qwen2.5-Coder-0.5B-Instruct with no filler and with 16,000 filler tokens of each kind and placement (120 problems per bar, the same problems in every bar; H100, bfloat16). Whiskers: 95% Wilson intervals.", "name": "fig-la-gsm8k"}, "image": {"alt": "Bar chart. In the paper's design accuracy is 97 percent with no filler, 57 with essay filler, 38 with whitespace, 27 with masked filler, 0 with single-space or newline tokens, and 99 with whitespace before the evidence. Without the final solution step accuracy is near 5 percent everywhere."}}
fig = condition_bars(bars, order=order, hue="variant", xlabel="GSM8K accuracy (%)")
plt.show()

# %% tags=["remove-input"]
# Its own cell: a second output in the figure cell would be labelled as the figure again.
display(Markdown(f"**Data.** {provenance(rows_table(rows, lambda r: 0), results_path, experiment)}. Greedy "
                 f"decoding; the figure's arms are the `gsm8k` entries of `arms` in the parameters cell."))

# %% [markdown]
# {numref}`fig-la-gsm8k` holds the chapter's findings. Filler between evidence and question
# costs this reader 40 to 70 points; the same whitespace *before* the evidence costs
# nothing; and without the last step of the worked solution the reader solves almost no
# problem even with no filler at all.
#
# (la-headline)=
# ## Filler between evidence and question (Tables 6, 7 and 3)
#
# The change from the short problem at 16,000 tokens, paired by problem: 95% bootstrap
# interval over problems and a sign-flip p. Beside it, the paper's GSM8K drops at 15,000
# tokens.

# %% tags=["hide-input"]
gsm = solve[solve["subtask"] == "gsm8k"]
drops = la.drops_from_short(gsm)
between = drops[drops["placement"] == "between"]
paper_drop = {(t, m): v for t, m, v in paper[(paper["subtask"] == "gsm8k") & (paper["length"] == 15000)
                                              & (paper["metric"] == "accuracy")][["table", "model", "value"]]
              .itertuples(index=False)}
TABLE = {"essay": 6, "whitespace": 7, "mask": 3}


def paper_cell(kind, who):
    value = paper_drop.get((TABLE.get(kind), who))
    return "—" if value is None else f"{value:+.1f}"


show(pd.DataFrame([{"filler (16K)": LABELS[(r.filler, "between")], "problems": r.n,
                    "ours: change (pts, 95% CI)": points_ci(r.change, r.ci_low, r.ci_high),
                    "sign-flip p": f"{r.p_sign_flip:.3g}",
                    "paper, Llama-3-8B (15K)": paper_cell(r.filler, "Llama3-8B"),
                    "paper, Mistral-7B (15K)": paper_cell(r.filler, "Mistral-7B-v0.3")}
                   for r in between.itertuples()]),
     notes="The paper's short-problem accuracy on GSM8K is 86-88% (Llama-3-8B) and 71% (Mistral-7B); ours is "
           f"{100 * gsm[gsm['filler_tokens'] == 0]['correct'].mean():.1f}%.")

# %% [markdown]
# **Sample size.** From the observed per-problem differences, the problems needed for a
# 95% interval of at most 10 points on each side (the paired design needs fewer the fewer
# problems change):

# %% tags=["hide-input"]
wide = gsm.pivot_table(index="problem", columns="condition", values="correct")
show(pd.DataFrame([{"comparison": f"{c} minus no filler", "problems": int(wide[c].notna().sum()),
                    "discordant": f"{(wide[c] != wide['no filler']).mean():.0%}",
                    "problems for +-10 pts": n_for_half_width((wide[c] - wide["no filler"]).dropna())}
                   for c in ["essay", "whitespace", "masked", "whitespace, before the evidence"]]))

# %% [markdown]
# All four intervals are within 10 points on each side at 120 problems.
#
# (la-placement)=
# ## Evidence next to the question (Table 8)
#
# Filler between evidence and question changes two things at once: the input gets longer
# and the question moves away from its evidence. The paper separates them by putting the
# whitespace *before* the evidence. Paired on the same problems:

# %% tags=["hide-input"]
placed = la.paired_differences(gsm[gsm["filler"] == "whitespace"], condition="placement", control="between",
                               treatment="before", by=["subtask", "filler_tokens"])
before = drops[drops["placement"] == "before"].iloc[0]
t8 = paper[(paper["table"] == 8) & (paper["subtask"] == "gsm8k") & (paper["length"] == 15000)]
show(pd.DataFrame([
    {"comparison": "whitespace before the evidence minus no filler", "problems": int(before["n"]),
     "ours (pts, 95% CI)": points_ci(before["change"], before["ci_low"], before["ci_high"]),
     "sign-flip p": f"{before['p_sign_flip']:.3g}",
     "paper, Table 8 (15K)": ", ".join(f"{m}: {v:+.1f}" for m, v in zip(t8["model"], t8["value"]))},
    {"comparison": "before minus between (same whitespace)", "problems": int(placed.iloc[0]["n"]),
     "ours (pts, 95% CI)": points_ci(placed.iloc[0]["change"], placed.iloc[0]["ci_low"], placed.iloc[0]["ci_high"]),
     "sign-flip p": f"{placed.iloc[0]['p_sign_flip']:.3g}", "paper, Table 8 (15K)": "—"}]))

# %% [markdown]
# With the question next to its evidence, 16,000 tokens of whitespace cost this reader
# nothing; the same whitespace between them costs 58 points. For this reader and task the
# loss follows the distance between evidence and question, not the length of the input.
# The paper's 7-8B models lost 8-9 points in this placement; we rule out a loss that large.
# One task, one filler kind and one reader: it is a finding about this setting, not a
# general law.
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
unit = gsm[gsm["filler"].isin(["whitespace", "space_tokens", "newline_tokens"]) & (gsm["placement"] == "between")]
show(unit.groupby("condition").agg(problems=("correct", "size"), accuracy=("correct", "mean"),
                                  mean_new_tokens=("new_tokens", "mean"),
                                  at_token_cap=("new_tokens", lambda s: (s >= la.budget("gsm8k", "solve")).mean()))
     .assign(accuracy=lambda d: (100 * d["accuracy"]).round(1), mean_new_tokens=lambda d: d["mean_new_tokens"].round(0),
             at_token_cap=lambda d: (100 * d["at_token_cap"]).round(0))
     .rename(columns={"accuracy": "accuracy (%)", "at_token_cap": "outputs at the token cap (%)"}).reset_index())
examples = unit[unit["filler"] != "whitespace"].drop_duplicates("condition")
display(Markdown("\n".join(f"* {c}: `{ascii(o[:90])}`" for c, o in zip(examples["condition"], examples["output"]))))

# %% [markdown]
# Sixteen thousand single-space or newline tokens break this reader: it answers none of
# the 120 problems. After single spaces it still answers in the asked format, but with a
# wrong number; after newlines it mostly writes whitespace, markup or unrelated code until
# the token cap. The 128-space unit leaves it at 38%. Which whitespace a study uses is not
# a detail: here it is the difference between a drop of 58 points and a collapse.
#
# ## Does the task need reasoning?
#
# In the paper's design the evidence holds the problem *and its worked solution*, whose last
# line usually states the result, so a model can score by carrying that number across the
# filler. Removing the last step leaves the reader something to compute:

# %% tags=["hide-input"]
cut = solve[solve["subtask"] == "gsm8k_no_final_step"]
show(summarize(cut, ["condition"]).assign(
    accuracy=lambda d: [pct_ci(a, lo, hi) for a, lo, hi in zip(d["accuracy"], d["ci_low"], d["ci_high"])])
     [["condition", "n", "accuracy"]].rename(columns={"accuracy": "accuracy (%, 95% Wilson)", "n": "problems"}))
sample = cut[cut["filler_tokens"] == 0].head(3)
answer = {p.id: p.answer for p in problems}
display(Markdown("Outputs with no filler: " + "; ".join(f"`{o}` (answer {answer[e]})"
                                                        for o, e in zip(sample["output"], sample["example_id"]))))

# %% [markdown]
# Without the final step this reader answers at once ("The answer is 12.") and is right on
# 7 of 120 problems even with no filler. With the step it copies the stated result and is
# right on 116. So, for this reader, GSM8K in the paper's design measures whether a number
# survives the trip across the filler, not reasoning over long inputs; the paper's larger
# models may well reason, but the design cannot tell the two apart.
#
# (la-varsum)=
# ## VarSum with room to finish
#
# VarSum is the paper's synthetic arithmetic task: fifty variables `x_i = n`, and the
# question asks for the sum of three of them, so the evidence must be read, not copied.
# A first run of it was withdrawn because its 192-token budget cut off 61% of the outputs.
# The budget is now 512 tokens. Whether that is enough is measured, not assumed: the
# table gives the longest output and the longest *correct* output against the cap. All
# 120 problems run with no filler; the first 16 also with 16,000 essay tokens between
# evidence and question (a 16K prompt takes about four minutes on this CPU, and the
# reader turns out to be at the floor, so more problems would not change the verdict).

# %% tags=["hide-input"]
varsum = solve[solve["subtask"] == "varsum"]
if varsum.empty:
    display(Markdown("No VarSum rows in this run (its arms are not among the parameters)."))
else:
    varsum_cap = la.budget("varsum", "solve")
    show(varsum.groupby("filler_tokens").agg(
        problems=("correct", "size"), accuracy=("correct", "mean"), at_cap=("new_tokens", lambda s: (s >= varsum_cap).mean()),
        longest=("new_tokens", "max"),
        longest_correct=("new_tokens", lambda s: s[varsum.loc[s.index, "correct"] == 1].max()))
         .assign(accuracy=lambda d: (100 * d["accuracy"]).round(1), at_cap=lambda d: (100 * d["at_cap"]).round(1))
         .rename(columns={"accuracy": "accuracy (%)", "at_cap": f"outputs at the {varsum_cap}-token cap (%)",
                          "longest": "longest output (tokens)", "longest_correct": "longest correct output (tokens)"})
         .reset_index().rename(columns={"filler_tokens": "essay tokens"}))
    varsum_drop = la.drops_from_short(varsum)
    vp = paper[(paper["subtask"] == "varsum") & (paper["table"] == 6) & (paper["metric"] == "accuracy")].pivot_table(
        index="model", columns="length", values="value")
    paper_15k = ", ".join(f"{m}: {r[15000]:+.0f} (from {r[0]:.0f}%)" for m, r in vp.dropna(subset=[15000]).iterrows())
    show(pd.DataFrame([{"comparison": f"{int(r.filler_tokens):,} essay tokens minus no filler", "problems": r.n,
                        "ours (pts, 95% CI)": points_ci(r.change, r.ci_low, r.ci_high),
                        "sign-flip p": f"{r.p_sign_flip:.3g}", "paper, Table 6 (15K)": paper_15k}
                       for r in varsum_drop.itertuples()]))
    reads = pd.DataFrame([(r["condition"]["filler_tokens"], *la.varsum_values_read(r["prompt"], r["output"]))
                          for r in rows if r["condition"]["subtask"] == "varsum" and r["condition"]["mode"] == "solve"],
                         columns=["filler_tokens", "stated", "right"]).groupby("filler_tokens").sum()
    show(reads.assign(share=lambda d: (100 * d["right"] / d["stated"]).round(1)).reset_index()
         .rename(columns={"filler_tokens": "essay tokens", "stated": "values of asked variables stated",
                          "right": "of which match the evidence", "share": "share right (%)"}))

# %% [markdown]
# With no filler no output reaches the cap: the longest has 261 tokens and the longest
# correct one 255, so the 512-token budget no longer decides any score (with 16K essay
# tokens one of 16 outputs runs to the cap, listing `x_46, x_45, x_44, ...` in a loop that
# no budget would end). What decides the scores is the reader. With no filler it gets 4 of
# 120 sums right (3.3%). It does write a step-by-step solution, but with the wrong
# numbers: of the 374 values it states for the variables the question asks about, 52
# (14%) are the values in the evidence. The paper's 7-8B readers start at 68-96% and lose
# 47-60 points at 15K. From 3.3% no drop of that size can happen: with 16K essay tokens
# the reader solves none of 16 problems (-6.2 points, 95% CI [-18.8, 0.0], n = 16,
# sign-flip p = 1). **VarSum cannot measure a length effect for this reader**; it needs a
# reader that solves the short problem (the 1.5B model, on a GPU, at the `full` scale).
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

# %% tags=["hide-input"] mystnb={"figure": {"caption": "RULER QA1 and QA2 at 4,000 tokens, Qwen2.5-Coder-0.5B-Instruct (CPU, bfloat16; rows in data/results/qwen2.5-coder-0.5b-instruct/ruler_qa/): RULER's string_match_part with its prompt over the whole context, with the paper's recite-then-answer, and with the documents the recitation names pasted verbatim (110 questions per bar, the same questions in every bar of a task). Whiskers: 95% Wilson intervals.", "name": "fig-la-ruler"}, "image": {"alt": "Bar chart. QA1: 35 percent with the whole context, 18 with recite-then-answer, 8 from the named documents. QA2: 24, 14 and 9 percent."}}
RULER_MODES = {"answer": "RULER's prompt, whole context", "retrieve_then_answer": "recite, then answer (paper)",
               "answer_from_named": "answer from the named documents (ours)"}
RULER_TASKS = {"qa1": "QA1 (SQuAD)", "qa2": "QA2 (HotpotQA)"}
ruler_scored = (pd.DataFrame(rq.score_rows(ruler_rows, chapter.ruler_questions(params))) if ruler_rows else
                pd.DataFrame(columns=["subtask", "length", "mode", "example_id", "new_tokens", "correct"]))
ruler_answers = ruler_scored[ruler_scored["mode"].isin(list(RULER_MODES))].assign(
    condition=lambda d: d["mode"].map(RULER_MODES), task=lambda d: d["subtask"].map(RULER_TASKS))
if ruler_answers.empty:
    display(Markdown("No RULER rows in this run (`ruler` is None)."))
else:
    fig = condition_bars(summarize(ruler_answers, ["task", "condition"]), order=list(RULER_MODES.values()),
                         hue="task", xlabel="RULER string_match_part (%)")
    plt.show()

# %% tags=["remove-input"]
# Its own cell: a second output in the figure cell would be labelled as the figure again.
if not ruler_answers.empty:
    display(Markdown(f"**Data.** {provenance(rows_table(ruler_rows, lambda r: 0), results_path, rq.TASK)}. "
                     f"Greedy decoding, parameters: `ruler = {ruler}`."))

# %% [markdown]
# In {numref}`fig-la-ruler` both second steps lose to RULER's prompt over the whole context, on both tasks. The
# paired changes, with Table 5's GPT-4o numbers at the same length:

# %% tags=["hide-input"]
t5 = paper[paper["table"] == 5].pivot_table(index=["subtask", "length"], columns="metric", values="value")
if not ruler_answers.empty:
    steps = pd.concat([la.paired_differences(ruler_scored, condition="mode", control="answer", treatment=m,
                                             by=["subtask", "length"]).rename(columns={m: "second_step"})
                       .assign(step=RULER_MODES[m]) for m in ["retrieve_then_answer", "answer_from_named"]])

    def paper_t5(subtask, length, step):
        if step != RULER_MODES["retrieve_then_answer"] or (subtask, length) not in t5.index:
            return "—"
        r = t5.loc[(subtask, length)]
        return f"{r['baseline']:.1f} -> {r['retrieve_then_answer']:.1f} ({r['retrieve_then_answer'] - r['baseline']:+.1f})"

    show(pd.DataFrame([{"task": RULER_TASKS[r.subtask], "tokens": f"{r.length:,}", "second step": r.step,
                        "questions": r.n, "whole context (%)": f"{r.answer:.1f}",
                        "second step (%)": f"{r.second_step:.1f}",
                        "change (pts, 95% CI)": points_ci(r.change, r.ci_low, r.ci_high),
                        "sign-flip p": f"{r.p_sign_flip:.3g}",
                        "paper, GPT-4o (Table 5)": paper_t5(r.subtask, r.length, r.step)}
                       for r in steps.itertuples()]),
         notes="Paired by question; 95% percentile bootstrap over questions. The paper's column: baseline -> "
               "recite-then-answer at the same length.")

# %% [markdown]
# **Why.** The paper's method assumes the recitation retrieves; for this reader it mostly
# does not. The table below scores the recitations themselves: whether they name (by
# number) a document that holds the answer, whether any line is copied verbatim from the
# context, from a document holding the answer, and whether a gold answer appears at all.

# %% tags=["hide-input"]
recitations = ruler_scored[ruler_scored["mode"] == "recite"]
if not recitations.empty:
    show(recitations.groupby("subtask").agg(
        questions=("example_id", "size"), names=("named", lambda s: (s > 0).mean()),
        supporting=("names_a_supporting", "mean"), copies=("copies_text", "mean"),
        copies_supporting=("copies_supporting", "mean"), answer=("answer_in_recitation", "mean"),
        tokens=("new_tokens", "median"))
         .pipe(lambda d: d.assign(**{c: (100 * d[c]).round(1) for c in
                                     ["names", "supporting", "copies", "copies_supporting", "answer"]}))
         .rename(index=RULER_TASKS, columns={
             "names": "name a document (%)", "supporting": "name one holding the answer (%)",
             "copies": "copy a line verbatim (%)", "copies_supporting": "copy a line of one holding the answer (%)",
             "answer": "contain a gold answer (%)", "tokens": "median length (tokens)"})
         .reset_index().rename(columns={"subtask": "task"}))
    ruler_wide = ruler_scored.pivot_table(index=["subtask", "example_id"], columns="mode", values="correct")
    show(pd.DataFrame([{"task": RULER_TASKS[t], "comparison": f"{RULER_MODES[m]} minus whole context",
                        "questions": int(w[m].notna().sum()), "discordant": f"{(w[m] != w['answer']).mean():.0%}",
                        "questions for +-10 pts": n_for_half_width((w[m] - w["answer"]).dropna())}
                       for t, w in ruler_wide.groupby(level="subtask") for m in ["retrieve_then_answer", "answer_from_named"]]))

# %% [markdown]
# The recitations are short (a median of 29.5 tokens on QA1, 24 on QA2; 9 of 220 run to
# the 1,024-token cap): often a bare header, a paraphrase of one sentence, or a copied
# sentence under a wrong number. Only 11% (QA1) and 19% (QA2) name a document that holds
# the answer, so pasting the named documents verbatim does worse still (8% and 9%): the
# reader's numbers are unreliable even where its text is right. The paper's second step
# keeps whatever text the reader wrote, and a gold answer is in 29% (QA1) and 22% (QA2) of
# recitations, which bounds what it can reach. **Verdict:** for a 0.5B reader,
# recite-then-answer costs 16.4 points on QA1 (95% CI [-26.4, -6.4], n = 110) and 10.0 on
# QA2 ([-18.2, -1.8], n = 110), where GPT-4o gained 1.8 and 2.0 ({ref}`findings`: opposite
# direction on both): the remedy needs a reader that can retrieve, as the paper itself
# says. Both intervals are at most 10 points wide on each side. The verdict on QA2 moved
# with more data: at 100 questions its interval touched 0 (-9 [-17, 0]) and the finding
# read "not reproduced"; the ten questions that brought QA1's interval to 10 points also
# moved QA2's off 0.
#
# ## Not run yet: MMLU, HumanEval, recitation and retrieve-then-solve
#
# The paper's MMLU and HumanEval, the recitation prompts (its retrieval measure) and
# retrieve-then-solve (Table 4) are implemented and tested at CI scale, with budgets raised
# after the withdrawn first run (HumanEval 768, recitation 1,024 tokens; it had cut off 71%
# of HumanEval outputs). Their 16K rows need a GPU (the `full` scale):
#
# ```bash
# longctx reproduce --chapters length_alone --scale full --batch-size 64 --token-budget 524288
# ```
#
# ## What we found
#
# *Computed from the committed rows (`data/results/qwen2.5-coder-0.5b-instruct/length_alone/`,
# 1,456 generations, and `ruler_qa/`, 880); the cell after this text checks the quoted
# numbers at every build.*
#
# * **Filler between evidence and question hurts, as the paper says, and more.** GSM8K
#   accuracy falls from 96.7% to 56.7% with 16K essay tokens (-40.0 points, 95% CI
#   [-49.2, -30.0]), 38.3% with whitespace (-58.3 [-67.5, -49.2]) and 26.7% with the filler
#   masked (-70.0 [-78.3, -61.7]); n = 120 problems, every p < 0.001. The paper's 7-8B
#   models lost 3-29 points at 15K. For this reader masking hurts most: what remains when
#   nothing is there to distract is the distance in positions.
# * **With the question next to its evidence, length costs nothing.** Whitespace before the
#   evidence: 99.2% (+2.5 [0.0, +5.8]); the paper's models lost 8-9 points, which our
#   interval rules out ({ref}`findings`: not reproduced). Before minus between: +60.8
#   points. For this reader and task the loss follows evidence-question distance.
# * **"Whitespace" must be specified.** Single-space or newline tokens, 16K of them,
#   drive accuracy to 0% (wrong numbers after spaces, unrelated text after newlines);
#   128-space tokens leave 38%.
# * **The paper's GSM8K design barely needs reasoning from this reader.** Without the final
#   step of the worked solution it scores 5.8% with no filler, against 96.7% with it.
# * **VarSum is at the floor for this reader, so it says nothing about length.** With a
#   512-token budget that no correct output approaches (longest 255 tokens), it solves 4
#   of 120 short problems (3.3%) and none of 16 with 16K essay tokens (-6.2 [-18.8, 0.0]);
#   only 14% of the values it writes down are the ones in the evidence.
# * **Recite-then-answer needs a reader that retrieves.** On RULER QA1 and QA2 at 4K tokens
#   the paper's two steps cost this reader 16.4 points (95% CI [-26.4, -6.4]) and 10.0
#   points ([-18.2, -1.8]), n = 110 questions each, where GPT-4o gained about 2: only 11%
#   and 19% of its recitations name a document that holds the answer.

# %% tags=["remove-cell"]
checked = 0
if model == "qwen2.5-coder-0.5b-instruct" and backend == "hf" and num_problems == 120 and seed == 0:
    acc = gsm.groupby("condition")["correct"].mean().mul(100).round(1).to_dict()
    assert acc == {"no filler": 96.7, "essay": 56.7, "whitespace": 38.3, "masked": 26.7,
                   "whitespace, before the evidence": 99.2, "single-space tokens": 0.0, "newline tokens": 0.0}, acc
    got = {r.filler: (round(r.change, 1), round(r.ci_low, 1), round(r.ci_high, 1), r.n, r.p_sign_flip < 0.001)
           for r in between.itertuples() if r.filler in ("essay", "whitespace", "mask")}
    assert got == {"essay": (-40.0, -49.2, -30.0, 120, True), "whitespace": (-58.3, -67.5, -49.2, 120, True),
                   "mask": (-70.0, -78.3, -61.7, 120, True)}, got
    assert (round(before["change"], 1), round(before["ci_low"], 1), round(before["ci_high"], 1)) == (2.5, 0.0, 5.8)
    assert round(placed.iloc[0]["change"], 1) == 60.8
    no_step = cut.groupby("filler_tokens")["correct"].mean()
    assert round(100 * no_step[0], 1) == 5.8 and int(round(no_step[0] * 120)) == 7
    assert int(gsm[gsm["filler_tokens"] == 0]["correct"].sum()) == 116
    vs = varsum.groupby("filler_tokens").agg(n=("correct", "size"), right=("correct", "sum"),
                                             longest=("new_tokens", "max"), at_cap=("new_tokens", lambda t: (t >= 512).sum()))
    assert vs.to_dict("index") == {0: {"n": 120, "right": 4, "longest": 261, "at_cap": 0},
                                   16000: {"n": 16, "right": 0, "longest": 512, "at_cap": 1}}, vs
    assert varsum[varsum["correct"] == 1]["new_tokens"].max() == 255
    vd = varsum_drop.iloc[0]
    assert (round(vd["change"], 1), round(vd["ci_low"], 1), round(vd["ci_high"], 1), vd["n"], vd["p_sign_flip"]) == \
        (-6.2, -18.8, 0.0, 16, 1.0), vd
    assert reads.loc[0].tolist() == [374, 52]
    assert len(rows) == 1456
    checked = 34
    if ruler == {"subtasks": ["qa1", "qa2"], "lengths": [4000], "num_questions": 110}:
        got = {(r.subtask, r.step): (round(r.change, 1), round(r.ci_low, 1), round(r.ci_high, 1), r.n, round(r.answer),
                                     round(r.second_step))
               for r in steps.itertuples()}
        assert got == {("qa1", RULER_MODES["retrieve_then_answer"]): (-16.4, -26.4, -6.4, 110, 35, 18),
                       ("qa2", RULER_MODES["retrieve_then_answer"]): (-10.0, -18.2, -1.8, 110, 24, 14),
                       ("qa1", RULER_MODES["answer_from_named"]): (-26.4, -35.5, -18.2, 110, 35, 8),
                       ("qa2", RULER_MODES["answer_from_named"]): (-14.5, -22.7, -6.4, 110, 24, 9)}, got
        rec = recitations.groupby("subtask").agg(sup=("names_a_supporting", "mean"), ans=("answer_in_recitation", "mean"),
                                                 tok=("new_tokens", "median"), cap=("new_tokens", lambda t: (t >= 1024).sum()))
        want = pd.DataFrame({"sup": [0.11, 0.19], "ans": [0.29, 0.22], "tok": [29.5, 24.0], "cap": [5, 4]},
                            index=["qa1", "qa2"])
        assert (rec.sort_index().astype(float).round(2) - want).abs().max().max() < 1e-9, rec
        assert all(r.ci_high - r.change <= 10.05 and r.change - r.ci_low <= 10.05
                   for r in steps.itertuples() if r.step == RULER_MODES["retrieve_then_answer"])
        first_100 = {q.id for q in chapter.ruler_questions(params)["qa2"][1][:100]}  # the sample is prefix-stable
        at_100 = la.paired_differences(ruler_scored[ruler_scored["example_id"].isin(first_100)], condition="mode",
                                       control="answer", treatment="retrieve_then_answer", by=["subtask", "length"])
        at_100 = at_100[at_100["subtask"] == "qa2"].iloc[0]
        assert (round(at_100.change), round(at_100.ci_low), round(at_100.ci_high), at_100.n) == (-9, -17, 0, 100), at_100
        assert len(ruler_rows) == 880
        checked += 27
print(f"quoted numbers checked: {checked}")

# %% tags=["remove-cell"]
# Consistency: every planned request has a row (plus the second-step rows built from
# recitations), every row one scored line.
assert len(stored) >= sum(len(b.requests) for b in blocks) and len(rows) == len(scored)
assert len(ruler_rows) == len(ruler_scored) and len(rows) + len(ruler_rows) == len(stored)
assert len({r["key"] for r in stored}) == len(stored)
