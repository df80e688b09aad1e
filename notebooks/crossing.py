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
# # Crossing the papers: which manipulation matters most?
#
# **What the papers claim, one manipulation each.** Lost in the Middle: a document in the
# middle of the context is read worse than one at the start, and asking the question
# before the documents as well (query-aware contextualization) barely changes
# multi-document QA. C-NORM: rewriting part of each passage with a chosen delimiter helps.
# TAG: XML tags with their definitions in the prompt help. Semantic competition: what
# hurts is distractors that resemble the question, not their number, so far-ranked
# distractors hurt less than the retriever's top hits. Context length alone: filler
# between the evidence and the question hurts by itself.
#
# **What we test.** Each paper changes one thing with the rest fixed, so none can say
# which of these matters most for a given reader, or whether they add up. Here all six
# vary together on one task, 10-document NQ-Open QA, two levels each, in a 2^(6-1) half
# fraction (32 of the 64 combinations, defining relation I = ABCDEF: resolution VI, so
# every main effect and two-way interaction is estimable, aliased only with five- and
# four-way interactions, which we assume negligible). Every question is asked in all 32
# cells, so every comparison is paired within question. Effects come from a linear
# probability model fitted by GEE with standard errors clustered by question: a main
# effect is the change in accuracy (points) from its low to its high level, averaged over
# the other five; a two-way interaction is how much one factor's effect changes between
# the levels of another.
#
# All manipulations are `longctx.transforms` (see {doc}`../book/methods`), the same ones
# the other chapters use, so any other reader runs this chapter with one command:
#
# ```bash
# make run NB=notebooks/crossing.py MODEL=Qwen/Qwen2.5-1.5B-Instruct
# ```

# %% tags=["parameters", "hide-input"]
model = "qwen2.5-coder-0.5b-instruct"  # alias, .gguf path, checkpoint directory or hub id
num_questions = 24  # NQ-Open questions, each asked in every cell
num_documents = 10  # documents per prompt: the gold one and num_documents - 1 distractors
pool_size = 1000  # BM25-ranked candidates per question; far distractors come from its bottom half
factors = ["position", "format", "tags", "distractors", "filler", "query_aware"]
fraction = "half"  # "half" (2^(k-1), resolution k) or "full" (2^k)
cnorm_delimiter = ":"  # the delimiter the C-NORM chapter's attention selection chose for this reader
cnorm_ratio = 0.5
far_from = 0.5  # far distractors: ranks at or beyond this fraction of the pool
filler_tokens = 1000  # whitespace tokens between the documents and the question (high level; 8000 at paper scale)
seed = 0
device = "auto"
backend = "hf"  # hf (transformers), llamacpp (the GGUF file in llama.cpp) or openai (a server)
backend_url = None  # the server of the openai backend, e.g. http://127.0.0.1:8000/v1
dtype = "auto"
batch_size = 8
token_budget = 65536  # rows x prompt tokens per batch
results_dir = "data/results"
# A second reader whose stored rows answer the same prompts, shown beside this one, and the
# backend that made them (run it first: `longctx reproduce --chapters crossing --scale book
# --model <it> --backend <backend>`). llama.cpp: about 2x faster than transformers on a CPU.
second_reader = "qwen2.5-coder-1.5b-instruct"
second_backend = "llamacpp"

# %% tags=["remove-cell"]
import warnings

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from longctx import crossing as X
from longctx.backends import load_backend, spec
from longctx.chapters import crossing as chapter
from longctx.paths import resolve
from longctx.plots import effects_forest, interaction_plot, readers_forest
from longctx.report import n_for_half_width, points_ci, show
from longctx.replay import replay_summary
from longctx.reproduce import run_blocks, stored_rows
from longctx.results import comparable_rows, model_label, provenance, rows_table
from longctx.store import ResultsStore
from longctx.tasks import multidoc_qa as qa

warnings.filterwarnings("ignore", category=FutureWarning)
results_path = resolve(results_dir)
backend_spec = spec(backend, backend_url)
params = dict(num_questions=num_questions, num_documents=num_documents, pool_size=pool_size, factors=factors,
              fraction=fraction, cnorm_delimiter=cnorm_delimiter, cnorm_ratio=cnorm_ratio, far_from=far_from,
              filler_tokens=filler_tokens, seed=seed)
design = chapter.design(params)

# %% [markdown]
# The prompts come from `longctx.chapters.crossing.plan` (shared with `longctx
# reproduce`); stored rows are reused, and the model is loaded only for missing ones.

# %%
blocks = chapter.plan(params)
run_blocks(blocks, model=model, results_dir=results_path, batch_size=batch_size, token_budget=token_budget,
           backend=backend_spec, load=lambda: load_backend(model, backend_spec, device=device, dtype=dtype),
           progress=True, log=lambda message: None)
table = rows_table(stored_rows(blocks, model=model, results_dir=results_path, backend=backend_spec), qa.score)
fx = X.effects(table, design)
expected = {f.name: f.expected for f in design.factors}

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Effects on accuracy of the six manipulations (main effects, blue) and of their two-way interactions (grey), with 95% intervals clustered by question, from one reader on 10-document NQ-Open QA. At the right: the direction each paper claims for its manipulation.", "name": "fig-crossing-forest"}, "image": {"alt": "Forest plot of six main effects and fifteen two-way interactions in accuracy points, with intervals."}}
effects_forest(fx, expected=expected, title=f"{model}: {len(design.cells)} cells x "
                                            f"{table['example_id'].nunique()} questions")
plt.show()

# %% [markdown]
# (crossing-main)=
# ## Main effects against each paper's claim
#
# Each main effect compares the 16 cells at the factor's high level with the 16 at its
# low level, for the same questions. The verdict compares the interval with the paper's
# claimed direction: *agrees* when it excludes zero on the claimed side, *opposite* when it
# excludes zero on the other side, *undecided* when it includes zero (for the one claim of
# no effect, query-aware contextualization, an interval around zero agrees).

# %% tags=["hide-input"]
verdicts = X.verdicts(fx, design)
show(verdicts.assign(**{"effect (pts, 95% CI)": [points_ci(e, lo, hi) for e, lo, hi in
                                                 zip(verdicts["estimate"], verdicts["ci_low"], verdicts["ci_high"])],
                        "half-width": ((verdicts["ci_high"] - verdicts["ci_low"]) / 2).round(1)})
     [["factor", "levels", "paper", "claim", "effect (pts, 95% CI)", "half-width", "verdict"]],
     notes=f"{table['example_id'].nunique()} questions x {len(design.cells)} cells = {len(table)} answers; "
           "GEE linear probability model, independence working correlation, robust errors clustered by question.")

# %% [markdown]
# **How many questions.** The book asks every question in all 32 cells, so each main
# effect is, per question, the mean over 16 cells minus the mean over the other 16. The
# size needed for a ±10-point interval follows from the spread of those per-question
# differences (n = (1.96 s / 10)², s their standard deviation), computed here from the run:

# %% tags=["hide-input"]
unit_diffs = X.unit_differences(table, design)
sizing = pd.DataFrame([{"factor": f, "questions": int(unit_diffs[f].notna().sum()),
                        "sd of per-question effects (pts)": round(100 * unit_diffs[f].std(), 1),
                        "questions for +-10 pts": n_for_half_width(unit_diffs[f].dropna())}
                       for f in unit_diffs.columns])
show(sizing, notes="Averaging over 16 cells per level makes each question's difference far less noisy than "
                   f"one 0/1 comparison, which is why {len(unit_diffs)} questions can decide six effects at once.")

# %% [markdown]
# **Interactions.** The largest two-way interaction, drawn as accuracy at its four level
# combinations (averaged over the other four factors): parallel lines would mean the two
# manipulations simply add up.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Accuracy at the four combinations of the two factors with the largest interaction, averaged over the other factors; 95% intervals resample whole questions.", "name": "fig-crossing-interaction"}, "image": {"alt": "Interaction plot: accuracy for two levels of one factor, one line per level of the other."}}
interactions = fx[fx["kind"] == "interaction"]
top = interactions.loc[interactions["estimate"].abs().idxmax()]
a, b = top["term"].split(" x ")
interaction_plot(X.cell_means(table, design, a, b), a, b,
                 title=f"{a} x {b}: {points_ci(top['estimate'], top['ci_low'], top['ci_high'])} pts")
plt.show()

# %% tags=["hide-input"]
show(interactions.assign(**{"interaction (pts, 95% CI)": [points_ci(e, lo, hi) for e, lo, hi in
                                                          zip(interactions["estimate"], interactions["ci_low"],
                                                              interactions["ci_high"])]})
     .sort_values("p")[["term", "interaction (pts, 95% CI)", "p"]].round(3).head(6),
     notes="The six interactions with the smallest p-values of fifteen; with fifteen tests, one p below 0.05 "
           "is expected by chance alone.")

# %% [markdown]
# **What the fraction cannot separate.** Each estimate below is really the sum of the
# effect named and its alias; the design assumes the higher-order alias is zero.

# %% tags=["hide-input"]
show(pd.DataFrame([{"effect": k, "aliased with": v} for k, v in X.aliases(design).items()][:6])
     if design.fraction != "full" else pd.DataFrame([{"design": "full factorial: no aliasing"}]))

# %% [markdown]
# **Check with a logistic model.** The same design fitted by a logistic GEE (log odds
# ratios): the signs should agree with the linear model's wherever its interval excludes
# zero.

# %% tags=["hide-input"]
logit = X.effects(table, design, family="logistic", interactions=False)
show(logit.assign(**{"log odds ratio (95% CI)": [f"{e:+.2f} [{lo:+.2f}, {hi:+.2f}]" for e, lo, hi in
                                                 zip(logit["estimate"], logit["ci_low"], logit["ci_high"])]})
     [["term", "log odds ratio (95% CI)", "p"]].round(3))

# %% [markdown]
# (crossing-readers)=
# ## A second reader
#
# Does what matters most depend on the reader? When a second reader (`second_reader`, by
# default Qwen2.5-Coder-1.5B-Instruct, three times this reader's size, run through llama.cpp:
# `second_backend`) has rows for the same prompts, its main effects are fitted the same way on the questions both readers answered
# in every cell, and the difference between the readers is paired by question (bootstrap
# interval over questions, sign-flip p).

# %% tags=["hide-input"]
this_reader, other_reader = model_label(model, backend), model_label(second_reader, second_backend)
MIN_SHARED = 8  # fewer questions give intervals too wide to compare effects of 10-30 points
own_folder = ResultsStore.for_model(results_path, model, chapter.EXPERIMENT, backend_spec).dir.parent.name
others = comparable_rows(results_path, chapter.EXPERIMENT, [q for b in blocks for q in b.requests], exclude=own_folder)
other_table = rows_table(others, qa.score) if others else table.iloc[:0]
other_table = other_table[other_table["model"] == other_reader]
both_readers = None
if other_reader == this_reader:
    display(Markdown(f"`second_reader` is this chapter's own reader (`{this_reader}`); name another one to compare."))
elif other_table.empty:
    display(Markdown(
        f"No stored rows of `{other_reader}` answer these {sum(b.size for b in blocks)} prompts yet, so this "
        "section shows one reader. Make them with `longctx reproduce --chapters crossing --scale book "
        f"--model {second_reader} --backend {second_backend}` (the store resumes) and rebuild the page."))
elif len(shared := X.complete_units(table, design) & X.complete_units(other_table, design)) < MIN_SHARED:
    display(Markdown(
        f"`{other_reader}` has answered {len(shared)} of these questions in all {len(design.cells)} cells so far "
        f"(a run stores whole questions in turn); the comparison waits for {MIN_SHARED}. Resume it with "
        f"`longctx reproduce --chapters crossing --scale book --model {second_reader} --backend {second_backend}`."))
else:
    both_readers = X.reader_effects(pd.concat([table, other_table], ignore_index=True), design,
                                    [this_reader, other_reader])
    shared_ids, shared = shared, int(both_readers["questions"].iloc[0])
    show(both_readers.assign(ci=[points_ci(e, lo, hi) for e, lo, hi in zip(
        both_readers["estimate"], both_readers["ci_low"], both_readers["ci_high"])])
         .pivot(index="factor", columns="reader", values="ci")[[this_reader, other_reader, "difference"]]
         .reset_index(),
         notes=f"Main effects in points (95% CI); {shared} questions answered by both readers in all "
               f"{len(design.cells)} cells; difference = {other_reader} minus {this_reader}.")
    readers_forest(both_readers, [this_reader, other_reader], expected=expected,
                   title=f"Main effects of two readers, {shared} shared questions")
    plt.show()

# %% tags=["hide-input"]
display(Markdown("**Data.** " + provenance(pd.concat([table, other_table], ignore_index=True), results_path,
                                          chapter.EXPERIMENT)))

# %% [markdown]
# ## What we found
#
# The key numbers of this run, computed from the tables above:

# %% tags=["hide-input"]
main_fx = fx[fx["kind"] == "main"].set_index("term")
ranked = main_fx["estimate"].abs().sort_values(ascending=False).index
key_numbers = pd.DataFrame(
    [{"finding": "accuracy over all cells", "value": f"{100 * table['correct'].mean():.1f}% of {len(table)} answers"}]
    + [{"finding": f"{f}: {design.factor(f).high} minus {design.factor(f).low} (pts, 95% CI)",
        "value": f"{points_ci(main_fx.loc[f, 'estimate'], main_fx.loc[f, 'ci_low'], main_fx.loc[f, 'ci_high'])}"
                 f" ({verdicts.set_index('factor').loc[f, 'verdict']})"} for f in ranked]
    + [{"finding": f"largest interaction: {top['term']} (pts, 95% CI)",
        "value": points_ci(top["estimate"], top["ci_low"], top["ci_high"])}])
show(key_numbers)

# %% tags=["remove-cell"]
# The prose below quotes the book run; fail loudly if the committed results stop saying it.
checked = 0
if (model == "qwen2.5-coder-0.5b-instruct" and backend == "hf" and num_questions == 24 and num_documents == 10
        and filler_tokens == 1000 and fraction == "half" and pool_size == 1000 and seed == 0):
    assert len(table) == 768 and table["example_id"].nunique() == 24
    assert round(100 * table["correct"].mean(), 1) == 49.2
    got = {f: (round(main_fx.loc[f, "estimate"], 1), round(main_fx.loc[f, "ci_low"], 1), round(main_fx.loc[f, "ci_high"], 1))
           for f in main_fx.index}
    assert got == {"position": (-14.1, -22.3, -5.8), "distractors": (7.3, -0.5, 15.1), "format": (-5.2, -10.9, 0.5),
                   "tags": (-2.1, -9.9, 5.7), "filler": (-2.1, -5.5, 1.4), "query_aware": (-1.6, -9.5, 6.4)}, got
    assert ((main_fx["ci_high"] - main_fx["ci_low"]) / 2).max() < 8.4
    assert verdicts.set_index("factor")["verdict"].to_dict() == {
        "distractors": "undecided", "format": "undecided", "tags": "undecided", "position": "agrees",
        "filler": "undecided", "query_aware": "agrees (no effect)"}
    assert top["term"] == "format x filler" and (round(top["estimate"], 1), round(top["ci_low"], 1),
                                                 round(top["ci_high"], 1)) == (9.4, 2.4, 16.3)
    assert (interactions["p"] < 0.05).sum() == 2
    assert (logit.set_index("term")["estimate"] * main_fx["estimate"] > 0).all()  # signs agree
    assert sizing["questions for +-10 pts"].max() == 18
    checked = 20
    if (second_reader, second_backend) == ("qwen2.5-coder-1.5b-instruct", "llamacpp") and both_readers is not None:
        assert shared == 24 and len(other_table) == 768
        assert round(100 * other_table["correct"].mean(), 1) == 63.9
        by = both_readers.set_index(["reader", "factor"])

        def quoted(reader, factor):
            r = by.loc[(reader, factor)]
            return round(r["estimate"], 1), round(r["ci_low"], 1), round(r["ci_high"], 1)

        assert quoted(other_reader, "position") == (-2.9, -8.1, 2.4)
        assert quoted(other_reader, "distractors") == (5.5, 0.6, 10.4)
        assert quoted(this_reader, "distractors") == (7.3, -0.5, 15.1)
        assert quoted("difference", "position") == (11.2, 3.6, 20.3)
        assert round(by.loc[("difference", "position"), "p"], 3) == 0.017
        assert quoted("difference", "distractors") == (-1.8, -9.1, 5.5)
        small = by.loc[other_reader].drop(index=["position", "distractors"])
        assert small["estimate"].abs().max() < 3 and ((small["ci_low"] < 0) & (small["ci_high"] > 0)).all()
        diff = by.loc["difference"]
        decided = diff[((diff["ci_low"] > 0) | (diff["ci_high"] < 0)) & (diff["p"] < 0.05)]
        assert list(decided.index) == ["position"]
        other_fx = X.effects(other_table, design)
        other_inter = other_fx[other_fx["kind"] == "interaction"]
        assert list(other_inter.loc[other_inter["p"] < 0.05, "term"]) == ["format x filler"]
        other_top = other_inter.set_index("term").loc["format x filler"]
        assert (round(other_top["estimate"], 1), round(other_top["ci_low"], 1), round(other_top["ci_high"], 1)) == (7.8, 1.2, 14.4)
        half = (by.loc[other_reader, "ci_high"] - by.loc[other_reader, "ci_low"]) / 2
        assert round(half.max(), 1) == 8.6 and round(((diff["ci_high"] - diff["ci_low"]) / 2).max(), 1) == 11.3
        checked += 12
print(f"quoted numbers checked: {checked}")

# %% [markdown]
# With Qwen2.5-Coder-0.5B-Instruct on 24 NQ-Open questions, each asked in all 32 cells
# (768 answers, 49.2% correct overall), every main effect has a 95% interval at most 8.3
# points on each side:
#
# * **Position matters most, and in the paper's direction.** Moving the gold document
#   from first to the middle of ten costs -14.1 points (95% CI -22.3 to -5.8), averaged
#   over every combination of the other five manipulations. Lost in the Middle reports
#   -15.6 for GPT-3.5-Turbo at 10 documents; this is the one claim that holds across
#   the crossing for this reader.
# * **Which distractors compete comes next.** Far-ranked distractors instead of BM25's
#   top hits gain +7.3 points (CI -0.5 to +15.1): the semantic-competition direction, but
#   the interval touches zero.
# * **C-NORM, tags and filler do little here.** C-NORM -5.2 (CI -10.9 to +0.5), spaCy
#   tags with definitions -2.1 (CI -9.9 to +5.7), 1,000 whitespace tokens -2.1 (CI -5.5 to
#   +1.4). None excludes zero; C-NORM and tags lean the way their own chapters found for
#   this reader (both hurt there, with larger n and longer contexts), not the papers' way.
#   The filler level is small (1,000 tokens, doubling a ~1K-token prompt, chosen for the
#   CPU); the length-alone chapter's 16K fillers are where length shows.
# * **Query-aware contextualization changes nothing** (-1.6, CI -9.5 to +6.4), as Lost in
#   the Middle reports for multi-document QA.
# * **Mostly additive.** Two of fifteen interactions have p < 0.05, about what chance
#   gives: the largest, format x filler (+9.4, CI +2.4 to +16.3), says C-NORM costs less
#   when filler is present. The logistic fit agrees in sign with every main effect.
#
# For a practitioner with this reader: put the answer-bearing document first and prefer
# less similar distractors; reformatting, tagging or padding the context are not worth
# it.
#
# **The ranking depends on the reader.** The same 768 prompts answered by
# Qwen2.5-Coder-1.5B-Instruct (three times the size, through llama.cpp; {ref}`crossing-readers`
# has the table and the figure), 24 questions paired between the readers:
#
# * **The larger reader is right more often**: 63.9% of its 768 answers against 49.2%.
# * **Position nearly stops mattering.** Moving the gold document to the middle costs the
#   1.5B reader -2.9 points (CI -8.1 to +2.4) against -14.1 for the 0.5B. The readers differ
#   by +11.2 points (CI +3.6 to +20.3, sign-flip p = 0.017): the one factor on which they
#   differ. Lost in the Middle finds the U-shape in much larger models, so this says that
#   at 10 short documents the 1.5B reader reads the middle almost as well as the start,
#   not that the effect goes away with size.
# * **Which distractors compete becomes the largest effect**: far-ranked instead of BM25's
#   top hits gains +5.5 points (CI +0.6 to +10.4), the semantic-competition direction, now
#   with an interval that excludes zero (0.5B: +7.3, CI -0.5 to +15.1; difference -1.8, CI
#   -9.1 to +5.5).
# * **C-NORM, tags, filler and query-aware stay small** (within ±3 points for the 1.5B
#   reader, none decided), and so do their differences between the readers.
# * **The same interaction**: format x filler is again the clearest for the 1.5B reader
#   (+7.8, CI +1.2 to +14.4), its only one of fifteen with p < 0.05.
# * **Sizes.** Each of the 1.5B reader's main effects has a 95% interval at most 8.6 points
#   on each side; the differences between readers are wider (up to ±11.3 points, for tags),
#   so a difference between readers smaller than about 11 points is not resolved at n = 24.
#
# For a practitioner the order of advice changes with the reader: with the 0.5B, put the
# answer-bearing document first; with the 1.5B, where every other manipulation moves
# accuracy by 3 points or less, the one that counts is keeping passages that resemble the
# question without answering it (the retriever's top non-answers) out of the context.
#
# **How the rows were made.** The 1.5B reader's run stores one question (32 prompts) at a
# time and resumes where it stopped:
#
# ```bash
# longctx reproduce --chapters crossing --scale book --model qwen2.5-coder-1.5b-instruct --backend llamacpp
# ```
#
# Its first 648 rows were made on an AMD EPYC development machine (about 21 s a prompt on 2
# cores), the last 120 on an Intel Xeon (about 36 s), with llama.cpp built for each CPU.
# Greedy decoding can round differently on another CPU, so 16 of the first machine's rows were
# answered again on the second (`longctx replay`; `data/bench/replay-crossing-1.5b-llamacpp.json`):

# %% tags=["hide-input"]
display(Markdown(replay_summary("data/bench/replay-crossing-1.5b-llamacpp.json")))

# %% [markdown]
# The summary below is computed from the stored rows, so it stays true for any
# `second_reader`:

# %% tags=["hide-input"]
if both_readers is None:
    display(Markdown(f"Not compared yet: `{other_reader}` has answered too few questions in every cell "
                     f"(the comparison waits for {MIN_SHARED})."))
else:
    display(Markdown(f"On the {shared} questions both readers answered in all {len(design.cells)} cells "
                     f"({len(other_table)} stored `{other_reader}` rows), accuracy over all cells is "
                     f"{100 * table[table['example_id'].isin(shared_ids)]['correct'].mean():.1f}% for `{this_reader}` "
                     f"and {100 * other_table[other_table['example_id'].isin(shared_ids)]['correct'].mean():.1f}% "
                     f"for `{other_reader}`.\n\n"
                     + X.describe_reader_comparison(both_readers, [this_reader, other_reader])))

# %% [markdown]
# The paper scale (20 documents, 8,000 filler tokens, all 64 cells, 200 questions) needs a
# GPU: `--scale paper`.
