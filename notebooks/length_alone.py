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
# Despite Perfect Retrieval*) split short problems (Variable Summation, GSM8K, MMLU,
# HumanEval) into evidence and question and push them apart with filler. Accuracy falls
# with length even when the model can recite the evidence word for word (Table 6: Llama-3-8B
# loses 59 points on VarSum at 7.5K essay tokens while its recitation exact match drops 8),
# when the filler is whitespace (Table 7), and when the filler is masked so the model
# attends only to evidence and question (Table 3: Llama-3 still loses 4-24 points at 15K).
# Reciting the evidence first and solving from a fresh short prompt recovers much of the
# loss (Table 4: Mistral on GSM8K, 41.6 -> 69.1 at 15K).
#
# **What we test.** The same construction from `longctx.tasks.length_alone` and
# `longctx.padding`, for any model: filler measured in the reader's own tokens (a
# placeholder in the prompt that the engine expands with the reader's tokenizer),
# masking done without computing the masked tokens at all (positions after the gap are
# shifted; equivalence with an explicit attention mask is a unit test), recitation scored
# by exact match separately from solving, retrieve-then-solve as a second short prompt,
# HumanEval run only in a sandboxed subprocess. Every change from the short problem comes
# with a paired bootstrap interval over problems and a sign-flip p-value.
#
# **What differs.** One small reader, Qwen2.5-Coder-0.5B-Instruct (the papers' readers
# are 7-8B), 12 problems per task instead of the full test sets, lengths 0 / 4K / 16K
# tokens instead of up to 30K, run on a lent H100 within a 30-minute budget. The
# before-evidence placement (Table 8) was run later without a GPU, on a 2-core CPU in
# float32, and so only for GSM8K (the one task where this reader has accuracy to lose); a
# device check pairs CPU reruns of GPU rows to show that the machine is not what differs.

# %% tags=["parameters"]
model = "qwen2.5-coder-0.5b-instruct"  # alias, .gguf path, checkpoint directory or hub id
subtasks = ["varsum", "gsm8k", "mmlu", "humaneval"]
num_problems = 12  # seeded problems per task (the paper: 100 VarSum, full GSM8K/MMLU/HumanEval test sets)
lengths = [0, 4000, 16000]  # filler tokens between evidence and question (the paper: 0 to 30000)
between_kinds = ["essay", "whitespace", "mask"]
recite_kinds = ["essay"]  # filler kinds for the recitation (retrieval) prompts
recite_lengths = [0, 16000]
before_kinds = ["whitespace"]  # filler kinds placed before the evidence (Table 8); [] skips them
before_lengths = None  # lengths for the before placement; None: the same as `lengths`
before_subtasks = ["gsm8k"]  # subtasks for the before placement; None: all of `subtasks`
retrieve_then_solve = True  # second short prompt from each recitation (Table 4)
seed = 0
device = "auto"
dtype = "auto"
batch_size = 8
token_budget = 262144  # rows x prompt tokens per batch, so long prompts get smaller batches
results_dir = "data/results"
experiment = "length_alone"

# %%
import warnings

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display

from longctx.models import load_model
from longctx.paths import repo_root, resolve
from longctx.results import provenance
from longctx.store import ResultsStore
from longctx.tasks import length_alone as la

warnings.filterwarnings("ignore", category=FutureWarning)
results_path = resolve(results_dir)
pd.set_option("display.precision", 1)
paper = pd.read_csv(repo_root() / "data" / "paper" / "length_alone.csv")

# %% [markdown]
# ## Problems and prompts
#
# Evidence and question per task follow the paper's Table 1; prompts are its Figures 6-11
# (`lib/longctx/prompts/length_alone_*.prompt`). VarSum and GSM8K questions also ask for
# "The answer is <number>." so the final number can be read, and generation stops there.

# %%
problems = {s: la.load_problems(s, num_problems, seed=seed) for s in subtasks}
requests = la.experiment_requests(problems, lengths=lengths, between_kinds=between_kinds,
                                  before_kinds=before_kinds, recite_kinds=recite_kinds,
                                  recite_lengths=recite_lengths, before_lengths=before_lengths,
                                  before_subtasks=before_subtasks)
masked = sorted((r for r in requests if r.condition["filler"] == "mask"),
                key=lambda r: (r.meta["subtask"] != "gsm8k", r.condition["filler_tokens"]))
if masked:
    print(f"{len(requests)} prompts. A masked {masked[0].meta['subtask']} prompt (the placeholder is never tokenized):\n")
    print(masked[0].prompt)

# %% [markdown]
# ## Generate (or reuse cached generations)
#
# Rows are cached per request in `results_dir/<model>/length_alone/generations.jsonl`; a
# rerun only generates what is missing, and the model is loaded only then.

# %%
store = ResultsStore.for_model(results_path, model, experiment)


def load():
    return load_model(model, device=device, dtype=dtype)


rows = la.run_plan(requests, store, model=model, load=load, batch_size=batch_size, token_budget=token_budget)
if retrieve_then_solve:
    recitations = [r for r in rows if r["condition"]["mode"] == "recite"]
    rows += la.run_plan(la.retrieve_then_solve_requests([p for ps in problems.values() for p in ps], recitations),
                        store, model=model, load=load, batch_size=batch_size, token_budget=token_budget)
scored = pd.DataFrame(la.score_rows(rows, [p for ps in problems.values() for p in ps]))
display(Markdown(provenance(scored, results_path, experiment) + "; generated on "
                 + ", ".join(sorted(set(scored["device"] + " " + scored["dtype"]))) + ", greedy decoding"))
display(scored.groupby(["mode", "filler", "filler_tokens"])["prompt_tokens"].agg(["count", "mean"]).round(0))

# %% [markdown]
# ## Accuracy against filler length (Tables 3, 6, 7)
#
# Accuracy per task, filler kind and length with Wilson 95% intervals; length 0 is the
# short problem, shared by all filler kinds.

# %%
solve = scored[scored["mode"] == "solve"]
accuracy = la.accuracy_by_length(solve)
grid = sns.relplot(data=accuracy.assign(accuracy=100 * accuracy["accuracy"]), x="filler_tokens", y="accuracy",
                   hue="filler", style="placement", col="subtask", kind="line", marker="o", height=2.8, aspect=0.9)
for ax in grid.axes.flat:  # Wilson bands per filler kind and placement
    sub = accuracy[accuracy["subtask"] == ax.get_title().split(" = ")[-1]]
    for _, g in sub.groupby(["filler", "placement"]):
        ax.fill_between(g["filler_tokens"], 100 * g["ci_low"], 100 * g["ci_high"], alpha=0.12)
grid.set_axis_labels("filler tokens", "accuracy (%)")
plt.show()
drops = la.drops_from_short(solve)
display(drops.pivot_table(index=["subtask", "filler", "placement"], columns="filler_tokens", values="change").round(1))

# %% [markdown]
# The paper's numbers for the same cells (points; length 0 absolute, longer lengths as the
# change from it). Its lengths are 3,750 / 7,500 / 15,000 / 30,000 tokens, ours 4,000 and
# 16,000; compare the 15,000 column with our 16,000.

# %%
between_tables = paper[(paper["metric"] == "accuracy") & (paper["table"] != 8)]  # Table 8 is the next section
display(between_tables.pivot_table(index=["table", "model", "filler", "subtask"], columns="length", values="value"))
display(drops.round(3))

# %% [markdown]
# ## Evidence next to the question (Table 8)
#
# Filler between evidence and question changes two things at once: the input gets longer and
# the question moves away from its evidence. The paper separates them by putting the
# whitespace *before* the evidence, so evidence and question stay adjacent exactly as in the
# short problem and only the length grows (its Figure 4b, Table 8). Below: the change from
# the short problem for each placement, then the two placements paired on the same problems
# at each length (before minus between), then the paper's Tables 7 (between) and 8
# (before) for the same tasks. In the committed run this placement covers GSM8K only (made
# on a CPU, see the next section).

# %%
placed = la.paired_differences(solve[solve["filler"] == "whitespace"], condition="placement",
                               control="between", treatment="before", by=["subtask", "filler_tokens"])
if placed.empty:
    display(Markdown("No filler-before rows in this run (`before_kinds` is empty)."))
else:
    before_drops = drops[(drops["filler"] == "whitespace") & drops["subtask"].isin(placed["subtask"])]
    display(before_drops.pivot_table(index=["subtask", "placement"], columns="filler_tokens",
                                     values=["change", "ci_low", "ci_high"]).round(1))
    display(placed.round(3))
display(paper[paper["table"].isin([7, 8]) & paper["subtask"].isin(placed.get("subtask", subtasks))].pivot_table(
    index=["model", "subtask", "table"], columns="length", values="value"))

# %% [markdown]
# ## Does the device matter?
#
# The rows above can come from different machines: in the committed run the filler-between,
# recitation and masked rows were generated on a lent H100 in bfloat16, the filler-before
# rows later on a CPU in float32. To see what the device alone does, some of the same
# requests were generated again on the CPU into a separate experiment
# (`scripts/run_length_alone.py --experiment length_alone_device_check ...`, see the end of
# the chapter) and are paired with the original rows request by request.

# %%
check_store = ResultsStore.for_model(results_path, model, f"{experiment}_device_check")
check_rows = check_store.rows() if check_store.path.exists() else []
if check_rows:
    rerun = pd.DataFrame(la.score_rows(check_rows, [p for ps in problems.values() for p in ps]))
    rerun = rerun[rerun["key"].isin(set(scored["key"]))]
    both = pd.concat([scored[scored["key"].isin(set(rerun["key"]))], rerun], ignore_index=True)
    both["run"] = both["device"] + " " + both["dtype"]
    runs = sorted(both["run"].unique())  # e.g. ["cpu float32", "cuda bfloat16"]
    same_output = both.groupby("key")["output"].nunique().eq(1).mean()
    display(Markdown(f"{len(rerun)} requests rerun ({' and '.join(runs)}); the same output text in both "
                     f"runs for {100 * same_output:.0f}% of them."))
    if len(runs) == 2:
        device_check = la.paired_differences(both, condition="run", control=runs[1], treatment=runs[0],
                                             by=["subtask", "mode", "filler", "filler_tokens"])
        display(device_check.round(3))
else:
    display(Markdown(f"No device-check rerun for this model (`{check_store.path}` is absent)."))

# %% [markdown]
# ## Retrieval by recitation, separately from solving (Table 6, "Ret.")
#
# The model is asked to recite the problem description (and GSM8K's analysis) and the
# question word for word; a recitation counts only if each section equals the original
# exactly (surrounding whitespace of a section ignored).

# %%
recite = scored[scored["mode"] == "recite"]
recitation = recite.groupby(["subtask", "filler_tokens"])[["evidence_em", "question_em", "retrieval_em"]].mean()
display((100 * recitation).round(1))
display(paper[paper["metric"] == "retrieval"].pivot_table(index=["model", "subtask"], columns="length",
                                                          values="value"))

# %% [markdown]
# ## Retrieve then solve (Table 4)
#
# The recited evidence goes into a new short prompt with the original question and no
# filler. Compared with solving the long prompt directly, on the same problems:

# %%
rts = scored[scored["mode"].isin(["solve", "retrieve_then_solve"]) & scored["filler"].isin(["essay", "none"])
             & scored["filler_tokens"].isin(recite_lengths)]
table4 = rts.pivot_table(index=["subtask", "filler_tokens"], columns="mode", values="correct", aggfunc="mean") * 100
display(table4.round(1))
display(paper[paper["table"] == 4].pivot_table(index=["model", "subtask", "length"], columns="metric",
                                               values="value"))

# %% [markdown]
# ## The cost of masking does not grow with the masked length
#
# `scripts/bench_masking.py` times the same problem with L masked tokens (position shift)
# and with L whitespace tokens actually computed, in the same run (best of two, 16 new
# tokens, CPU).

# %%
import json

bench = json.loads((repo_root() / "data" / "bench" / "masking-cpu.json").read_text())
print(f"model {bench['model']}, {bench['device']} {bench['dtype']}, longctx {bench['longctx_version']}")
display(pd.DataFrame(bench["rows"]))

# %% tags=["remove-cell"]
# The findings below quote these numbers; fail the build if the committed results change them.
if model == "qwen2.5-coder-0.5b-instruct" and num_problems == 12 and lengths == [0, 4000, 16000]:
    acc = solve.pivot_table(index=["subtask", "filler", "placement", "filler_tokens"], values="correct") * 100
    assert round(acc.loc[("gsm8k", "none", "none", 0), "correct"], 1) == 83.3
    assert round(acc.loc[("gsm8k", "essay", "between", 16000), "correct"], 1) == 25.0
    assert round(acc.loc[("gsm8k", "whitespace", "between", 16000), "correct"], 1) == 25.0
    assert round(acc.loc[("gsm8k", "mask", "between", 16000), "correct"], 1) == 33.3
    assert round(acc.loc[("varsum", "none", "none", 0), "correct"], 1) == 0.0
    assert round(recitation.loc[("gsm8k", 0), "retrieval_em"] * 100, 1) == 33.3
    assert round(table4.loc[("gsm8k", 16000), "retrieve_then_solve"], 1) == 41.7
    assert bench["rows"][-1]["explicit_over_masked"] > 1.5
    gsm16 = drops[(drops["subtask"] == "gsm8k") & (drops["filler_tokens"] == 16000)
                  & (drops["placement"] == "between")].set_index("filler")
    assert (gsm16["ci_high"] < 0).all() and list(gsm16.loc[["essay", "whitespace", "mask"], "change"].round(1)) == [-58.3, -58.3, -50.0]
    assert [round(gsm16.loc[k, "p_sign_flip"], 3) for k in ("essay", "whitespace", "mask")] == [0.039, 0.016, 0.070]
    if "whitespace" in before_kinds and "gsm8k" in (before_subtasks or subtasks):
        gsm_before = placed.set_index(["subtask", "filler_tokens"]).loc["gsm8k"]
        assert list(gsm_before["before"].round(1)) == [83.3, 83.3]
        assert list(gsm_before["between"].round(1)) == [75.0, 25.0]
        assert [round(gsm_before.loc[16000, k], 3) for k in ("change", "ci_low", "ci_high", "p_sign_flip")] \
            == [58.333, 33.333, 83.333, 0.016]
        gsm = solve[solve["subtask"] == "gsm8k"]
        short_answer = gsm[gsm["filler_tokens"] == 0].set_index("example_id")["output"]
        before = gsm[gsm["placement"] == "before"]
        assert len(before) == 24 and (before["output"].values == short_answer[before["example_id"]].values).all()
    if check_rows:
        assert len(rerun) == 60 and round(same_output, 2) == 0.93
        checked = device_check.set_index(["filler", "filler_tokens"])
        assert checked["change"].round(1).to_dict() == {("mask", 4000): 0.0, ("mask", 16000): -8.3, ("none", 0): 0.0,
                                                        ("whitespace", 4000): 0.0, ("whitespace", 16000): 0.0}
        assert checked.loc[("whitespace", 16000), "cpu float32"] == 25.0

# %% [markdown]
# ## What we found
#
# With Qwen2.5-Coder-0.5B-Instruct and 12 problems per task (so every cell is a count out
# of 12, and intervals are wide):
#
# * **GSM8K falls with length whatever the filler.** 83.3% on the short problem, 25.0%
#   with 16K essay tokens, 25.0% with 16K whitespace tokens and 33.3% with 16K *masked*
#   tokens, where the model attends to exactly the short prompt's tokens and only the
#   positions differ. Paired against the short problem the 16K drops are -58.3, -58.3 and
#   -50.0 points, with 95% bootstrap intervals that all stay below zero (sign-flip p =
#   0.039, 0.016 and 0.070 over 12 problems). This is the paper's central observation (its
#   Table 3), here with a reader more than ten times smaller. HumanEval also loses 25 points
#   at 16K essay tokens (interval below zero, p = 0.25), but not with whitespace or masking.
# * **With the evidence next to the question, length alone did not hurt GSM8K.** With the
#   whitespace placed *before* the evidence (evidence and question adjacent, as in the short
#   problem) accuracy stays at 83.3% at 4K and at 16K tokens; every one of the 24 answers is
#   word for word the short problem's answer. The same 16K whitespace *between* evidence and
#   question gives 25.0%: before minus between at 16K is +58.3 points [33.3, 83.3], sign-flip
#   p = 0.016. The paper reports drops for this placement too (its Table 8: GSM8K -8.1 for
#   Llama3 and -9.3 for Mistral at 15K), so here we do not reproduce its claim that length
#   alone hurts once distance is controlled. Together with the masked result (33.3% at 16K:
#   nothing to attend to but the short prompt, only the distance in positions differs),
#   what hurts this 0.5B reader is the distance between evidence and question, not the
#   input length or the absolute positions. Twelve problems and one task: a GPU run at
#   paper scale (below) is what would settle it for this reader.
# * **The device is not what differs.** The before rows were made on a CPU in float32, the
#   between rows on an H100 in bfloat16; the device check above regenerated the same GSM8K
#   requests on the CPU (short problem, whitespace and masked filler between, 4K and 16K).
#   56 of the 60 answers are word for word the same, accuracy is the same in every cell but
#   one (masked 16K: 33.3% on the GPU, 25.0% on the CPU, one problem), and the CPU also
#   gives 25.0% with 16K whitespace between. So on the CPU alone, before 83.3% against
#   between 25.0% at 16K: the placement, not the device, makes the difference.
# * **The other tasks are too weak or too noisy at this size.** VarSum is near 0% even on
#   the short problem: the 0.5B reader copies wrong values for the named variables and its
#   LaTeX-heavy reasoning often runs past the 192-token budget, so it has nothing to lose.
#   MMLU sits near chance (25% of options) and moves within its intervals. These are limits
#   of the reader and the sample, not evidence against the paper.
# * **Recitation is not "perfect retrieval" for this reader.** Exact-match recitation is
#   33.3% on GSM8K even at length 0 and 0% on MMLU (the model rewrites the options), so the
#   paper's premise (the model retrieves perfectly yet fails) cannot be established for a
#   0.5B model; the chapter reports it rather than assuming it.
# * **Retrieve-then-solve recovers part of the GSM8K loss:** solving from the recited
#   evidence in a new short prompt gives 41.7% against 25.0% when solving the 16K-essay
#   prompt directly (the paper: 41.6 -> 69.1 for Mistral at 15K).
# * **Masking is cheap.** The masked prompt costs the short prompt's compute at every
#   length, while computed whitespace grows with it (benchmark above).
#
# To run at paper scale on a GPU (more problems, 30K tokens, the before placement for
# every task):
#
# ```bash
# make run NB=notebooks/length_alone.py MODEL=Qwen/Qwen2.5-1.5B-Instruct \
#     PARAMS="-p num_problems 100 -p lengths '[0, 3750, 7500, 15000, 30000]' -p before_subtasks None"
# ```
#
# The committed before rows and the device check were made on the CPU with
#
# ```bash
# python scripts/run_length_alone.py --subtasks gsm8k --num-problems 12 --lengths 0 4000 16000 \
#     --recite-lengths 0 16000 --stages solve --before-kinds whitespace --token-budget 16384 --device cpu
# python scripts/run_length_alone.py --experiment length_alone_device_check --subtasks gsm8k \
#     --num-problems 12 --lengths 0 4000 16000 --between-kinds mask whitespace --before-kinds \
#     --recite-kinds --stages solve --token-budget 16384 --device cpu
# ```
