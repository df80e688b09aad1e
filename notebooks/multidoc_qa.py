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
# # Multi-document QA: does the answer's position matter?
#
# **What the paper claims.** Liu et al. (2023, *Lost in the Middle*, sections 2 and 4.1)
# give models a question with 10, 20 or 30 Wikipedia passages, one holding the answer, and
# move that passage from first to last. Accuracy is U-shaped: highest with the answer first
# or last, lowest in the middle (GPT-3.5-Turbo at 20 documents: 75.8% first, 53.8% middle,
# 63.2% last), and in the middle it can fall below answering with no documents at all
# (closed-book, 56.1%).
#
# **What we test.** The same prompts (their Figure 2 template), metric (any normalized
# gold answer contained in the first line of the output) and data (NaturalQuestions-Open
# with the gold passage from their release), with Qwen2.5-Coder-0.5B-Instruct on a 2-core
# CPU. The headline asks 150 questions with the answer first, in the middle and last among 20
# documents, plus closed-book and oracle (gold passage only), and tests the U-shape as a
# contrast fixed in advance: the middle minus the mean of the two edges, paired by question.
# 150 questions give both headline comparisons a 95% interval narrower than ±10 points (the
# sample-size table below says how many each needs). The rest of the grid (10 documents,
# query-aware contextualization) has 12 questions and is a demonstration. A last section
# puts a BM25 retriever in front of the reader (the paper's section 5): does accuracy keep
# rising as it is given 5 to 50 retrieved documents?
#
# **What differs.** Our distractors are reconstructed: the paper retrieved them with
# Contriever from all of Wikipedia (those files are not reachable here); we rank the other
# 2,654 questions' gold passages with BM25 and keep the top ones that do not contain an
# answer.

# %% tags=["parameters", "hide-input"]
model = "qwen2.5-coder-0.5b-instruct"  # alias, .gguf path, checkpoint directory or hub id
num_questions = 150  # questions in the headline (the paper: all 2,655)
detail_questions = 12  # questions in the rest of the grid (query-aware, other sizes)
num_documents = [10, 20]  # documents per prompt (the paper: 10, 20, 30)
# Relative depth of the gold document (0 first, 1 last) or 1-based positions: one list for
# every size, or a mapping from a size to its own list (e.g. {"10": [1, 5, 10], "20": [1, 10, 20]}).
gold_positions = [0.0, 0.5, 1.0]
query_aware = [False, True]  # without and with query-aware contextualization
distractors = "bm25"  # "bm25" (ranked, the paper's setting) or "random" (appendix B)
random_order = False  # shuffle distractors and say so in the prompt (appendix C)
source = "oracle"  # "oracle" (offline reconstruction) or "release" (the paper's files in release_dir)
release_dir = ""  # folder holding the nq-open-<k>_total_documents_gold_at_<i>.jsonl.gz files (source "release")
# Open-domain QA (section 5): retrieved documents per question, and how many questions.
open_domain_ks = [5, 10, 20, 30, 50]
open_domain_questions = 60  # the paper: all 2,655 (its subset with paragraph answers)
seed = 0
device = "auto"
backend = "hf"  # hf (transformers), llamacpp (the GGUF file in llama.cpp) or openai (a server)
backend_url = None  # the server of the openai backend, e.g. http://127.0.0.1:8000/v1
dtype = "auto"
prompt_mode = "auto"
batch_size = 4
results_dir = "data/results"
experiment = "multidoc_qa"

# %% tags=["remove-cell"]
import warnings
from functools import cache

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from longctx.chapters import all_requests
from longctx.chapters import multidoc_qa as chapter
from longctx.findings import paired_estimate
from longctx.metrics import summarize
from longctx.backends import load_backend, spec
from longctx.paths import repo_root, resolve
from longctx.plots import accuracy_by_position
from longctx.report import n_for_half_width, pct_ci, points_ci, show
from longctx.results import comparable_rows, paired_effects, position_gap_permutation, provenance, rows_table
from longctx.store import ResultsStore, run_requests
from longctx.tasks import multidoc_qa as qa

warnings.filterwarnings("ignore", category=FutureWarning)
results_path = resolve(results_dir)
backend_spec = spec(backend, backend_url)
paper = pd.read_csv(repo_root() / "data" / "paper" / "lost_in_the_middle_qa.csv")
params = dict(num_questions=num_questions, detail_questions=detail_questions, num_documents=num_documents,
              gold_positions=gold_positions, query_aware=query_aware, distractors=distractors,
              random_order=random_order, source=source, release_dir=release_dir, seed=seed,
              open_domain_ks=open_domain_ks, open_domain_questions=open_domain_questions)

# %% [markdown]
# The prompts come from `longctx.chapters.multidoc_qa.plan`, shared with `longctx
# reproduce`; stored rows are reused and the model is loaded only for missing ones.
# Generation stops at the first newline that ends a non-blank line, since only the first
# line is scored.

# %%
blocks = chapter.plan(params)
requests = all_requests([b for b in blocks if b.experiment == chapter.EXPERIMENT])
load = cache(lambda: load_backend(model, backend_spec, device=device, dtype=dtype, prompt_mode=prompt_mode, progress=print))
rows = run_requests(requests, ResultsStore.for_model(results_path, model, experiment, backend_spec), model=model,
                    backend=backend_spec, prompt_mode=prompt_mode, batch_size=batch_size, load=load,
                    params={"seed": seed, "source": source})
od_requests = all_requests([b for b in blocks if b.experiment == chapter.OPEN_DOMAIN])
od_rows = run_requests(od_requests, ResultsStore.for_model(results_path, model, chapter.OPEN_DOMAIN, backend_spec),
                       model=model, backend=backend_spec, prompt_mode=prompt_mode, batch_size=batch_size, load=load,
                       params={"seed": seed, "source": source}) if od_requests else []

# %% tags=["remove-cell"]
table = rows_table(rows, qa.score)
docs = table[table["setting"] == "documents"].copy()
docs["depth"] = (docs["gold_index"] / (docs["num_documents"] - 1)).round(2)
docs["position"] = docs["gold_index"].astype(int) + 1
docs["query"] = docs["query_aware"].map({False: "question at end", True: "query-aware"})
summary = summarize(docs, ["model", "num_documents", "query", "position"])
# Other models and backends that answered these same prompts: one more line each.
others = [r for r in comparable_rows(results_path, experiment, requests,
                                     exclude=ResultsStore.for_model(results_path, model, experiment,
                                                                    backend_spec).dir.parent.name)
          if r["condition"]["setting"] == "documents"]
if others:
    other_docs = rows_table(others, qa.score)
    other_docs["position"] = other_docs["gold_index"].astype(int) + 1
    other_docs["query"] = other_docs["query_aware"].map({False: "question at end", True: "query-aware"})
    shown = pd.concat([summary, summarize(other_docs, ["model", "num_documents", "query", "position"])],
                      ignore_index=True)
else:
    shown = summary
baselines = summarize(table[table["setting"] != "documents"], ["model", "setting"])
largest = max(num_documents)
head = docs[(docs["num_documents"] == largest) & ~docs["query_aware"]]
n_head = head["example_id"].nunique()

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Accuracy against the position of the document with the answer, 10 and 20 documents. Solid: query-aware; dashed: question at the end (the paper's prompt). Dotted line: closed-book; dash-dot: oracle (gold document only), 150 questions each. 150 questions per point at 20 documents with the question at the end, 12 elsewhere; bands are 95% Wilson intervals. One colour per model and backend whose committed rows answer these prompts.", "name": "fig-multidoc-position"}, "image": {"alt": "Two panels of accuracy against gold position. At 20 documents with the question at the end (150 questions) accuracy is 45 percent with the answer first, 31 percent in the middle and 38 percent last; the 12-question lines move within wide bands; the closed-book line lies far below every line and the oracle line above."}}
fig = accuracy_by_position(shown, facet="num_documents", facet_title="{} documents", style="query",
                           xlabel="Position of the document with the answer")
for ax in fig.axes:
    for b in baselines.itertuples():
        ax.axhline(100 * b.accuracy, ls=":" if b.setting == "closed-book" else "-.", lw=1, color="grey")
plt.show()

# %% [markdown]
# (multidoc-headline)=
# ## Headline: is the middle worse than the edges?
#
# {numref}`fig-multidoc-position` shows the position profile. The paper's claim is a
# U-shape, so the comparison is fixed before looking at the data: accuracy with the answer
# in the middle minus the mean of first and last, paired by question. The second claim
# compares the middle with closed-book on the same questions.

# %% tags=["hide-input"]
def cell(frame, index):
    part = frame[frame["gold_index"] == index]
    return dict(zip(part["example_id"], part["correct"]))


first, middle, last = cell(head, 0), cell(head, qa.position_indices(largest, [0.5])[0]), cell(head, largest - 1)
closed = dict(zip(*table[table["setting"] == "closed-book"][["example_id", "correct"]].T.to_numpy()))
edges = {q: (first[q] + last[q]) / 2 for q in set(first) & set(last)}
u_shape = paired_estimate(edges, middle, side_names=("edges", "middle"))
vs_closed = paired_estimate(closed, middle, side_names=("closed-book", "middle"))
gpt = paper[(paper["model"] == "GPT-3.5-Turbo") & (paper["num_documents"] == 20)].set_index("position")["accuracy"]
gpt_closed = paper[(paper["model"] == "GPT-3.5-Turbo") & (paper["setting"] == "closed-book")]["accuracy"].iloc[0]
paper_edges = (gpt[1] + gpt[20]) / 2
show(pd.DataFrame([
    {"comparison": f"middle minus edges ({largest} documents)", "questions": u_shape.n,
     "ours (pts, 95% CI)": points_ci(u_shape.difference, u_shape.ci_low, u_shape.ci_high),
     "sign-flip p": f"{u_shape.p:.3g}", "sides": u_shape.detail,
     "paper, GPT-3.5-Turbo (20 docs)": f"{gpt[10] - paper_edges:+.1f} ({gpt[10]} vs {paper_edges:.1f})"},
    {"comparison": f"middle of {largest} minus closed-book", "questions": vs_closed.n,
     "ours (pts, 95% CI)": points_ci(vs_closed.difference, vs_closed.ci_low, vs_closed.ci_high),
     "sign-flip p": f"{vs_closed.p:.3g}", "sides": vs_closed.detail,
     "paper, GPT-3.5-Turbo (20 docs)": f"{gpt[10] - gpt_closed:+.1f} ({gpt[10]} vs {gpt_closed})"},
]))

# %% [markdown]
# The best-minus-worst gap that earlier versions of this chapter reported picks its two
# positions after seeing the data, so noise alone makes it positive. A permutation test that
# shuffles each question's answers across positions and repeats the selection gives its
# p-value and the gap expected from noise:

# %% tags=["hide-input"]
gap_rows = []
for (k, q), g in docs.groupby(["num_documents", "query"]):
    res = position_gap_permutation(g.pivot_table(index="example_id", columns="position", values="correct"), seed=seed)
    gap_rows.append({"documents": k, "query": q, "questions": res["units"], "best minus worst (pts)": round(res["gap"], 1),
                     "expected from noise (pts)": round(res["null_mean"], 1), "permutation p": f"{res['p']:.3g}"})
show(pd.DataFrame(gap_rows))

# %% [markdown]
# **Sample size.** Questions needed for a 95% interval of at most 10 points on each side,
# from the observed per-question differences:

# %% tags=["hide-input"]
contrast = pd.Series({q: middle[q] - edges[q] for q in set(edges) & set(middle)})
closed_diff = pd.Series({q: middle[q] - closed[q] for q in set(middle) & set(closed)})
show(pd.DataFrame([{"comparison": "middle minus edges", "questions": len(contrast),
                    "questions for +-10 pts": n_for_half_width(contrast)},
                   {"comparison": "middle minus closed-book", "questions": len(closed_diff),
                    "questions for +-10 pts": n_for_half_width(closed_diff)}]))

# %% [markdown]
# ## Closed-book and oracle (the paper's Table 1)

# %% tags=["hide-input"]
ours_base = baselines.assign(accuracy=[pct_ci(a, lo, hi) for a, lo, hi in
                                       zip(baselines["accuracy"], baselines["ci_low"], baselines["ci_high"])])
t1 = paper[paper["table"] == "Table 1"].pivot(index="model", columns="setting", values="accuracy").reset_index()
show(pd.concat([ours_base.pivot(index="model", columns="setting", values="accuracy").reset_index()
                .assign(model=lambda d: d["model"] + " (ours, %, 95% Wilson)"), t1], ignore_index=True),
     notes=f"Ours: {baselines['n'].max()} questions.")

# %% [markdown]
# ## Accuracy by position, ours beside the paper's
#
# Our cells (accuracy % [95% Wilson interval]) and the paper's appendix G tables for the
# same numbers of documents (positions 1-based).

# %% tags=["hide-input"]
grid = summary.assign(cell=[pct_ci(a, lo, hi, 0) for a, lo, hi in
                            zip(summary["accuracy"], summary["ci_low"], summary["ci_high"])])
wide = grid.pivot_table(index=["num_documents", "query", "n"], columns="position", values="cell", aggfunc="first")
wide.columns = [f"position {c}" for c in wide.columns]
show(wide.reset_index().rename(columns={"num_documents": "documents", "n": "questions"}))
appendix = paper[(paper["table"] != "Table 1") & paper["num_documents"].isin(num_documents)]
app = appendix.pivot_table(index=["model", "num_documents"], columns="position", values="accuracy")
app.columns = [f"position {int(c)}" for c in app.columns]
show(app.reset_index().rename(columns={"num_documents": "documents"}), notes="The paper's accuracy (%).")

# %% [markdown]
# ## Query-aware contextualization
#
# The same (question, position) items with the question also before the documents; 95%
# bootstrap intervals resample whole questions (in the pooled row, across both sizes, since
# a question appears at each). The paper (section 4.2) finds it changes multi-document QA
# little.

# %% tags=["hide-input"]
effects = paired_effects(docs[docs["example_id"].isin(set(docs[docs["query_aware"]]["example_id"]))],
                         condition="query", control="question at end", treatment="query-aware",
                         length="num_documents", item=["example_id", "position"], seed=seed)
show(pd.DataFrame(effects).drop(columns="model").rename(columns={"num_documents": "documents", "items": "items"})
     if effects else pd.DataFrame([{"note": "run with query_aware = [False, True] to compare"}]))

# %% [markdown]
# ## Prompt length in tokens (the paper's appendix F)

# %% tags=["hide-input"]
show(table.assign(setting=table["setting"] + " " + table["num_documents"].astype(str))
     .groupby("setting")["prompt_tokens"].agg(["mean", "std", "max"]).round(1).reset_index())
display(Markdown("**Data.** " + provenance(table, results_path, experiment)))

# %% [markdown]
# (multidoc-open-domain)=
# ## Open-domain QA: more retrieved documents, the same answers (section 5)
#
# The paper's Figure 11 puts a retriever in front of the reader: for each NQ-Open question
# Contriever returns the top k = 5 to 50 Wikipedia passages, best first. The retriever's
# recall keeps rising with k, but reader accuracy saturates: from 20 to 50 documents
# GPT-3.5-Turbo gains about 1.5 points and Claude-1.3 about 1 (the paper's text; the figure
# gives no table). Our retriever is BM25 (`longctx.tasks.open_domain`) and our collection
# the NQ-Open oracle's 2,655 distinct gold chunks: far smaller than Wikipedia, and every
# question's answer-bearing chunk is in it, so recall runs higher and saturates sooner than
# the paper's. What we test is the reader: does its accuracy follow the retriever's
# recall as k grows, on the same questions at every k? Recall is also computed for all
# 2,655 questions, since it needs no model.

# %% tags=["remove-cell"]
from longctx.tasks import open_domain as od

od_table = rows_table(od_rows, od.score) if od_rows else None
if od_table is not None:
    od_curve = od.curve(od_table)
    od_steps = od.saturation(od_table)
    _, od_pool = chapter.questions_for(params)
    od_recall_rows = od.recall_table(od_pool, od.ChunkRetriever(od_pool), open_domain_ks)
    od_recall_all = summarize(od_recall_rows.assign(correct=od_recall_rows["recall"].astype(float)), ["k"])
    n_od = od_table["example_id"].nunique()
    od_shown = pd.concat([od_curve.replace({"measure": {"retriever recall@k": f"recall@k, the {n_od} questions read"}}),
                          od_recall_all.assign(measure=f"recall@k, all {len(od_pool):,} questions")],
                         ignore_index=True).assign(panel="open-domain")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Open-domain QA: BM25 recall@k (whether any of the top k chunks holds an answer) and reader accuracy against the number of retrieved documents k, on the same 60 NQ-Open questions at every k (Qwen2.5-Coder-0.5B-Instruct); the third line is recall over all 2,655 questions. Bands: 95% Wilson intervals.", "name": "fig-open-domain"}, "image": {"alt": "Line chart against k from 5 to 50: retriever recall rises from 90 to 100 percent while reader accuracy rises from 43 to 52 percent at k = 20 and falls back to 43 percent at k = 30 and 50."}}
if od_table is not None:
    fig = accuracy_by_position(od_shown, x="k", facet="panel", hue="measure", facet_title="BM25 over the NQ-Open gold chunks",
                               xlabel="Retrieved documents (k)", panel_width=6.0)
    fig.axes[0].set_ylabel("Recall or accuracy (%)")
    plt.show()

# %% [markdown]
# Each step up in k, paired over the questions (points, 95% bootstrap interval, sign-flip
# p). Saturation means recall still rises where accuracy no longer does; the paper's
# number is the step from 20 to 50 documents.

# %% tags=["hide-input"]
if od_table is not None:
    k_lo, k_hi = (20, 50) if {20, 50} <= set(open_domain_ks) else (min(open_domain_ks), max(open_domain_ks))
    od_head = od.saturation(od_table, [k_lo, k_hi]).set_index("measure")
    steps = pd.concat([od_steps, od_head.reset_index()], ignore_index=True)
    show(steps.assign(**{"change (pts, 95% CI)": [points_ci(c, lo, hi) for c, lo, hi in
                                                     zip(steps["change"], steps["ci_low"], steps["ci_high"])],
                         "sign-flip p": steps["p_sign_flip"].map(lambda p: f"{p:.3g}")})
         [["from k", "to k", "measure", "questions", "change (pts, 95% CI)", "sign-flip p"]],
         notes="Paper (section 5, from 20 to 50 documents): reader accuracy about +1.5 (GPT-3.5-Turbo) and about +1 "
               "(Claude-1.3), while Contriever's recall keeps rising.")
    display(Markdown("**Data.** " + provenance(od_table, results_path, chapter.OPEN_DOMAIN)))

# %% [markdown]
# ## At the paper's scale
#
# All 2,655 questions at 10, 20 and 30 documents with the paper's positions per size (a GPU
# run; each size has its own positions, since position 15 does not exist among 10
# documents):
#
# ```bash
# longctx reproduce --chapters multidoc_qa --scale paper --batch-size 64
# ```
#
# ## What we found
#
# *Computed from the committed rows (`data/results/qwen2.5-coder-0.5b-instruct/multidoc_qa/`
# and `.../open_domain/`, Qwen2.5-Coder-0.5B-Instruct on CPU: 150 questions in the headline,
# 12 in the rest of the grid, 60 in open-domain QA); the cell after this text checks the
# quoted numbers at every build.*
#
# * **The U-shape holds for this reader.** With 150 questions and 20 documents, the answer
#   in the middle scores 30.7% against 41.3% at the edges (first 44.7%, last 38.0%): middle
#   minus edges -10.7 points, 95% CI [-17.0, -4.0], sign-flip p = 0.003. The paper's
#   GPT-3.5-Turbo loses 15.7 points; our interval includes that ({ref}`findings`:
#   reproduced). The earlier 12-question run had shown the opposite sign (+12.5
#   [-4.2, +33.3]): a demonstration-sized sample pointed the wrong way.
# * **The best-minus-worst gap is real at 150 questions and noise at 12.** At 20 documents
#   with the question at the end, first minus middle is 14.0 points where picking best and
#   worst from noise alone would give 4.9 (permutation p = 0.003); the 12-question settings
#   give 17-42 points against 11-18 expected from noise, one of three with p < 0.05.
# * **Documents help this reader far more than they help the paper's models.** Closed-book
#   it answers 8 of 150 (5.3%); with the gold document in the middle of 20 it reaches 30.7%
#   (+25.3 points over closed-book, 95% CI [+18.0, +32.7], p < 0.001), the opposite of the
#   paper's GPT-3.5-Turbo, whose middle fell 2.3 points below its strong closed-book 56.1%.
#   A 0.5B model knows few NQ answers by itself, so any context that holds the answer
#   helps. Oracle (the gold document alone): 64.7%, so 19 distractors cost it a third of
#   that even at the best position.
# * **Query-aware contextualization: undecided at 12 questions.** -9.7 points pooled over both
#   sizes (95% CI [-22.2, 0.0], resampling questions across sizes). The paper found that
#   it changes multi-document QA little; our interval allows anything from no change to a
#   22-point loss.
# * **More retrieved documents stop helping this reader at 20 (open-domain QA, 60
#   questions).** BM25 recall over all 2,655 questions rises from 92.4% at k = 5 to 96.3%
#   at 20 and 97.7% at 50 (recall@50 minus recall@20: +1.4 points, 95% CI [+1.0, +1.9]);
#   on the 60 questions given to the reader it goes from 90.0% to 100% at k = 50. Reader
#   accuracy goes from 43.3% at k = 5 to 51.7% at 20, then back to 43.3% at 30 and 50
#   while the prompt grows from 2,505 to 6,194 tokens. From 20 to 50 documents: -8.3
#   points (95% CI [-18.3, +1.7], n = 60, sign-flip p = 0.18; 7 questions lost, 2 gained),
#   where the paper's GPT-3.5-Turbo gains about 1.5. Accuracy flat or falling while recall
#   rises is the paper's point; our interval still holds its +1.5, so the verdict stays
#   inconclusive at this n ({ref}`findings`), now leaning to a loss. It changed with the
#   data: at the first 40 questions accuracy peaked at k = 10 and the 20-to-50 step was
#   -2.5 [-12.5, +7.5]; with 20 more, the peak moved to 20 and the step to -8.3. Every step
#   of k moves fewer than 10 of the 60 answers, so single steps are not resolved. Our
#   collection is easy (every answer chunk is in it and recall@5 is already 92%), so these
#   numbers measure how the reader copes with more text, not how more documents make up
#   for a weak retriever.
# * **Our distractors are not the paper's.** BM25 over the other questions' gold chunks
#   finds documents that share words with the question but are rarely about the same
#   entity, so they are likely easier to reject than Contriever's Wikipedia neighbours.

# %% tags=["remove-cell"]
checked = 0
if model == "qwen2.5-coder-0.5b-instruct" and backend == "hf" and num_questions == 150 and detail_questions == 12 and seed == 0:
    assert (round(u_shape.difference, 1), round(u_shape.ci_low, 1), round(u_shape.ci_high, 1)) == (-10.7, -17.0, -4.0)
    assert round(u_shape.p, 3) == 0.003 and u_shape.detail == "middle 30.7% vs edges 41.3%" and u_shape.n == 150
    assert round(100 * sum(first.values()) / len(first), 1) == 44.7 and round(100 * sum(last.values()) / len(last), 1) == 38.0
    assert u_shape.ci_low <= gpt[10] - paper_edges <= u_shape.ci_high  # the paper's -15.7 lies inside
    assert (round(vs_closed.difference, 1), round(vs_closed.ci_low, 1), round(vs_closed.ci_high, 1)) == (25.3, 18.0, 32.7)
    assert vs_closed.p < 0.001
    gaps = {(g["documents"], g["query"]): g for g in gap_rows}
    head_gap = gaps[(20, "question at end")]
    assert head_gap["best minus worst (pts)"] == 14.0 and head_gap["expected from noise (pts)"] == 4.9
    assert head_gap["permutation p"] == "0.0028"
    small = [g for g in gap_rows if g["questions"] == 12]
    assert sorted(g["best minus worst (pts)"] for g in small) == [16.7, 25.0, 41.7]
    assert all(11 <= g["expected from noise (pts)"] <= 18 for g in small)
    assert sum(float(g["permutation p"]) < 0.05 for g in small) == 1
    hits = table.groupby("setting")["correct"].agg(["sum", "count"])
    assert hits.loc["closed-book"].tolist() == [8, 150] and round(100 * hits.loc["oracle", "sum"] / 150, 1) == 64.7
    pooled = next(e for e in effects if e["num_documents"] == "all")
    assert pooled["query-aware minus question at end (pts)"] == -9.7 and pooled["95% CI"] == "[-22.2, 0.0]"
    need = {"edges": n_for_half_width(contrast), "closed": n_for_half_width(closed_diff)}
    assert need == {"edges": 66, "closed": 89} and u_shape.ci_high - u_shape.ci_low <= 20
    assert vs_closed.ci_high - vs_closed.ci_low <= 20
    checked = 22
    if od_table is not None and open_domain_questions == 60 and open_domain_ks == [5, 10, 20, 30, 50]:
        acc = od_curve[od_curve["measure"] == "reader accuracy"].set_index("k")["accuracy"].mul(100).round(1).to_dict()
        assert acc == {5: 43.3, 10: 50.0, 20: 51.7, 30: 43.3, 50: 43.3}, acc
        rec60 = od_curve[od_curve["measure"] == "retriever recall@k"].set_index("k")["accuracy"]
        assert rec60[5] == 0.9 and rec60[50] == 1.0 and n_od == 60
        rec_all = od_recall_all.set_index("k")["accuracy"].mul(100).round(1).to_dict()
        assert (rec_all[5], rec_all[20], rec_all[50]) == (92.4, 96.3, 97.7), rec_all
        side = {k: dict(zip(g["example_id"], g["recall"].astype(float))) for k, g in od_recall_rows.groupby("k")}
        rise = paired_estimate(side[20], side[50])
        assert (round(rise.difference, 1), round(rise.ci_low, 1), round(rise.ci_high, 1), rise.n) == (1.4, 1.0, 1.9, 2655)
        toks = od_table.groupby("k")["prompt_tokens"].mean().round(0)
        assert (toks[20], toks[50]) == (2505, 6194)
        e = od_head.loc["reader accuracy"]
        assert (round(e["change"], 1), round(e["ci_low"], 1), round(e["ci_high"], 1), e["questions"]) == (-8.3, -18.3, 1.7, 60)
        assert round(e["p_sign_flip"], 2) == 0.18 and e["ci_high"] - e["ci_low"] <= 20
        w = od_table.pivot_table(index="example_id", columns="k", values="correct")
        assert ((w[50] - w[20]) < 0).sum() == 7 and ((w[50] - w[20]) > 0).sum() == 2
        assert all(((w[b] - w[a]) != 0).sum() < 10 for a, b in [(5, 10), (10, 20), (20, 30), (30, 50)])
        first40 = od_table[od_table["example_id"].isin([q.example_id for q in od_pool[:40]])]
        e40 = od.saturation(first40, [20, 50]).set_index("measure").loc["reader accuracy"]
        assert (round(e40["change"], 1), round(e40["ci_low"], 1), round(e40["ci_high"], 1)) == (-2.5, -12.5, 7.5)
        acc40 = first40.groupby("k")["correct"].mean()
        assert acc40.idxmax() == 10 and round(100 * acc40[10], 1) == 45.0
        checked += 26
print(f"quoted numbers checked: {checked}")

# %% tags=["remove-cell"]
# Consistency: every planned request has exactly one row.
assert len(rows) == len(requests) == len({r["key"] for r in rows})
assert summary["ci_low"].le(summary["accuracy"]).all() and summary["accuracy"].le(summary["ci_high"]).all()
