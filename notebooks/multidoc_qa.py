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
# # Multi-document QA: does the answer's position in the retrieved documents matter?
#
# **What the paper claims.** Liu et al. (2023, *Lost in the Middle*, sections 2 and 4)
# give a model a NaturalQuestions-Open question and k Wikipedia chunks, exactly one of
# which holds the answer. Accuracy is highest when that document comes first or last and
# falls when it sits in the middle: a U-shape at 10, 20 and 30 documents, for every model
# they test. In the middle, GPT-3.5-Turbo falls below its own closed-book accuracy
# (56.1%). Putting the question before and after the documents barely changes multi-
# document QA (unlike key-value retrieval).
#
# **What we test.** The same prompts (their Figure 2 and appendix C, as data files in
# `lib/longctx/prompts/`) and metric (first line of the answer, SQuAD-normalized,
# contains a gold answer), the same 2,655 questions and gold chunks. The distractors
# differ: the paper retrieved them with Contriever from all of Wikipedia, which cannot be
# fetched offline, so we rank the *other questions'* gold chunks with BM25 against the
# question and keep the top k-1 that hold no gold answer, most relevant first
# (`longctx.tasks.multidoc_qa.attach_distractors`). With the paper's files, set
# `source="release"` and `release_dir`.
#
# **Scale.** The book run uses the default reader (Qwen2.5-Coder-0.5B-Instruct) on the
# first `num_questions` questions with 10 and 20 documents, three gold positions, with and
# without query-aware contextualization; the
# paper's full grid (2,655 questions, 10/20/30 documents, every fifth position) is a
# parameter change on a GPU:
#
# ```bash
# make run NB=notebooks/multidoc_qa.py MODEL=Qwen/Qwen2.5-1.5B-Instruct \
#     PARAMS="-p num_questions 2655 -p num_documents '[10, 20, 30]' -p gold_positions '[1, 5, 10, 15, 20, 25, 30]'"
# ```

# %% tags=["parameters"]
model = "qwen2.5-coder-0.5b-instruct"  # alias, .gguf path, checkpoint directory or hub id
num_questions = 12  # the first N NQ-Open questions (the paper: all 2,655)
num_documents = [10, 20]  # documents per prompt (the paper: 10, 20, 30)
gold_positions = [0.0, 0.5, 1.0]  # relative depth of the gold document: 0 first, 1 last; ints are 1-based
query_aware = [False, True]  # without and with query-aware contextualization
distractors = "bm25"  # "bm25" (ranked, the paper's setting) or "random" (appendix B)
random_order = False  # shuffle distractors and say so in the prompt (appendix C)
source = "oracle"  # "oracle" (offline reconstruction) or "release" (the paper's files in release_dir)
release_dir = ""  # folder holding the nq-open-<k>_total_documents_gold_at_<i>.jsonl.gz files (source "release")
seed = 0
device = "auto"
dtype = "auto"
prompt_mode = "auto"
batch_size = 4
results_dir = "data/results"
experiment = "multidoc_qa"

# %%
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from longctx.metrics import paired_bootstrap_difference, summarize
from longctx.models import load_model
from longctx.paths import repo_root, resolve
from longctx.plots import accuracy_by_position
from longctx.results import load_experiment, paired_effects, provenance
from longctx.store import ResultsStore, run_requests
from longctx.tasks import multidoc_qa as qa

warnings.filterwarnings("ignore", category=FutureWarning)
results_path = resolve(results_dir)
pd.set_option("display.precision", 3)

# %% [markdown]
# ## Build the inputs
#
# Distractors are drawn from the whole pool of 2,655 gold chunks, so every question
# competes with the same corpus whatever `num_questions` is.

# %%
oracle = qa.read_oracle()
questions = oracle[:num_questions]
max_docs = max(num_documents)


def examples_for(k: int):
    if source == "release":
        return qa.read_release_file(Path(release_dir) / qa.release_filename(k, 0), limit=num_questions)
    exs = qa.attach_distractors(questions, max_docs - 1, kind=distractors, seed=seed, pool=oracle, progress=True)
    return [qa.shuffle_distractors(e, seed) for e in exs] if random_order else exs


requests = qa.make_baseline_requests(questions)
for k in num_documents:
    exs = examples_for(k)
    for qa_flag in query_aware:
        requests += qa.make_requests(exs, k, gold_positions, query_aware=qa_flag,
                                     mention_random_ordering=random_order, distractors=distractors)
print(f"{len(requests)} prompts; one with {num_documents[0]} documents:\n")
print(next(r for r in requests if r.condition["setting"] == "documents").prompt[:1200], "...")

# %% [markdown]
# ## Generate (or reuse cached generations)
#
# The answer line is enough for the metric, so generation stops at the first newline
# that ends a non-blank line.

# %%
store = ResultsStore.for_model(results_path, model, experiment)
rows = run_requests(
    requests, store, model=model,
    load=lambda: load_model(model, device=device, dtype=dtype, prompt_mode=prompt_mode, progress=print),
    prompt_mode=prompt_mode, batch_size=batch_size,
    params={"seed": seed, "num_questions": num_questions, "source": source},
)
print(f"{len(rows)} rows for {model}; accuracy {sum(qa.score(r) for r in rows) / len(rows):.1%}")

# %% [markdown]
# ## Accuracy vs position of the answer-bearing document
#
# Dotted lines: the same model closed-book (no documents) and oracle (only the gold
# document), the paper's Table 1 baselines. Bands are 95% Wilson intervals.

# %%
wanted = {r["key"] for r in rows}
table = load_experiment(results_path, experiment, score=qa.score, task=qa.TASK)
# Closed-book and oracle rows do not depend on the distractors or their order.
this_setting = (table["distractors"] == distractors) & (table["random_order"] == random_order)
table = table[table["example_id"].isin({r.example_id for r in requests})
              & ((table["setting"] != "documents") | this_setting)]
docs = table[table["setting"] == "documents"].assign(position=lambda d: d["gold_index"].astype(int) + 1)
docs = docs[docs["num_documents"].isin(num_documents)]
docs["query"] = docs["query_aware"].map({False: "question at end", True: "query-aware"})
summary = summarize(docs, ["model", "num_documents", "query", "position"])
baselines = summarize(table[table["setting"] != "documents"], ["model", "setting"])

fig = accuracy_by_position(summary, facet="num_documents", facet_title="{} documents", style="query",
                           xlabel="Position of document with the answer",
                           title="Multi-document QA, NQ-Open with BM25 distractors")
palette = {m: line.get_color() for ax in fig.axes for line in ax.get_lines() for m in [line.get_label().split(",")[0]]}
for ax in fig.axes:
    for _, b in baselines.iterrows():
        ax.axhline(100 * b["accuracy"], ls=":" if b["setting"] == "closed-book" else "-.", lw=1,
                   color=palette.get(b["model"], "grey"))
plt.show()
display(Markdown("Dotted: closed-book; dash-dot: oracle. **Data behind the figure.** "
                 + provenance(table, results_path, experiment)))

# %% [markdown]
# ## Ours beside the paper's
#
# Closed-book and oracle accuracy (the paper's Table 1) and, for each setting, accuracy by
# gold position with its interval and the best-minus-worst gap with a paired bootstrap
# interval over questions (the same questions at every position).

# %%
paper = pd.read_csv(repo_root() / "data" / "paper" / "lost_in_the_middle_qa.csv")
ours_baselines = baselines.assign(
    ours=lambda d: (100 * d["accuracy"]).round(1).astype(str) + " [" + (100 * d["ci_low"]).round(0).astype(int).astype(str)
    + ", " + (100 * d["ci_high"]).round(0).astype(int).astype(str) + "]"
).pivot(index="model", columns="setting", values="ours")
display(ours_baselines)
display(paper[paper["table"] == "Table 1"].pivot(index="model", columns="setting", values="accuracy"))

# %%
wide = summary.assign(cell=lambda d: (100 * d["accuracy"]).round(1).astype(str)).pivot_table(
    index=["model", "num_documents", "query"], columns="position", values="cell", aggfunc="first")
gaps = []
for (m, k, q), g in docs.groupby(["model", "num_documents", "query"]):
    by_pos = g.pivot_table(index="example_id", columns="position", values="correct")
    means = by_pos.mean()
    best, worst = means.idxmax(), means.idxmin()
    mean, lo, hi = paired_bootstrap_difference(by_pos[worst], by_pos[best], seed=seed)
    gaps.append({"model": m, "num_documents": k, "query": q, "best-worst (pts)": round(100 * mean, 1),
                 "95% CI": f"[{100 * lo:.1f}, {100 * hi:.1f}]"})
display(wide.join(pd.DataFrame(gaps).set_index(["model", "num_documents", "query"])))
display(Markdown("The paper's appendix G (accuracy %, by position of the gold document):"))
display(paper[paper["table"] != "Table 1"].pivot_table(index=["model", "num_documents"], columns="position",
                                                     values="accuracy"))

# %% [markdown]
# The query-aware effect, paired over the same (question, position) items, with a 95%
# bootstrap interval that resamples whole questions. The paper (its section 4.2) finds
# it changes multi-document QA little.

# %%
effect_rows = paired_effects(docs, condition="query", control="question at end", treatment="query-aware",
                             length="num_documents", item=["example_id", "position"], seed=seed)
display(pd.DataFrame(effect_rows) if effect_rows else Markdown("Run with `query_aware = [False, True]` to compare."))

# %% [markdown]
# ## Prompt length in tokens (the paper's appendix F)

# %%
display(table.assign(setting=lambda d: d["setting"] + " " + d["num_documents"].astype(str))
        .groupby(["model", "setting"])["prompt_tokens"].agg(["mean", "std", "max"]).round(1))

# %% [markdown]
# ## What we found
#
# Overall accuracy per model and setting, from the rows above.

# %%
labelled = table.assign(setting=lambda d: d["setting"] + " " + d["num_documents"].astype(str)
                        + d["query_aware"].map({True: ", query-aware", False: ""}))
display(summarize(labelled, ["model", "setting"]).round(3))

# %% [markdown]
# **Discussion of the book run** (`data/results/qwen2.5-coder-0.5b-instruct/multidoc_qa/`,
# the first 12 questions, BM25 distractors, seed 0). With 12 questions per cell every
# interval spans about 50 points, so this run can show only large effects. The cell after
# this text checks the numbers below against the committed results at each book build.
#
# * **Documents help, but far less than the gold document alone.** Closed-book, the 0.5B
#   model answers 1 of 12 (and that hit is the metric's known weakness: the answer "Oak
#   Island" is part of the question it repeats); with only the gold document (oracle) it
#   answers 9 of 12. The paper's models reach 31-56% closed-book and 76-89% oracle.
# * **At 10 documents (about 1,290 tokens) accuracy is highest with the gold document
#   first**: 7 of 12 first, 4 in the middle, 5 last, the paper's primacy side of the U
#   (GPT-3.5-Turbo: 76.8 / 61.2 / 62.4%).
# * **At 20 documents (about 2,490 tokens) the pattern does not repeat**: 3 of 12 first,
#   6 in the middle, 6 last. With intervals this wide neither length establishes a
#   position effect; the paper's U needed hundreds of questions per cell, and runs of the
#   full 2,655 on a GPU are one parameter change.
# * **Query-aware contextualization does not help** (-9.7 points pooled, 95% CI
#   [-23.6, 2.8]), in line with the paper's finding that it changes multi-document QA
#   little, unlike key-value retrieval.
# * **Our distractors are not the paper's.** BM25 over the other questions' gold chunks
#   finds documents that share words with the question (for the first question: other
#   Nobel Prize pages and songs titled "... Got ...") but are rarely about the same
#   entity, so they are likely easier to reject than Contriever's Wikipedia neighbours.

# %% tags=["remove-cell"]
# The discussion's numbers, checked against the committed book-scale results.
book = table[table["model"] == "qwen2.5-coder-0.5b-instruct"]
if len(book) == 168 and num_questions == 12:
    hits = book.groupby(["setting", "num_documents", "query_aware", "gold_index"], dropna=False)["correct"].sum()
    assert book[book["setting"] == "closed-book"]["correct"].sum() == 1
    assert book[book["setting"] == "oracle"]["correct"].sum() == 9
    assert [hits[("documents", 10, False, i)] for i in (0, 4, 9)] == [7, 4, 5]
    assert [hits[("documents", 20, False, i)] for i in (0, 9, 19)] == [3, 6, 6]
    pooled = next(e for e in effect_rows if e["model"] == "qwen2.5-coder-0.5b-instruct" and e["num_documents"] == "all")
    assert pooled["query-aware minus question at end (pts)"] == -9.7 and pooled["95% CI"] == "[-23.6, 2.8]"

# %% tags=["remove-cell"]
assert len(rows) == len(requests) == len(wanted)
assert summary["ci_low"].le(summary["accuracy"]).all() and summary["accuracy"].le(summary["ci_high"]).all()
