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
# # Tagging-Augmented Generation: tags and tag definitions on needle questions
#
# **What the paper claims.** Pal et al. (2025, *Tagging-Augmented Generation*) wrap chunks
# of a long context in XML-style semantic tags (`<Buildings & Landmarks>...</Buildings &
# Landmarks>`, from spaCy NER or from an LLM) and put the tags' definitions in the system
# prompt. On NoLiMa needle questions, where the question shares no keyword with the needle,
# tag definitions alone (TD) raise Claude 3.5 Sonnet from 81.2% to 91.3% at 250 tokens, and
# definitions plus tagged context (TD+TC) with the privileged LLM tags lift Claude 3.7 at
# 32K tokens from 45.6% to 52.4%, lowering the drop from the shortest to the longest
# context (Table 1). With spaCy tags on NovelQA the changes range from -2.8 (Claude 3.7, detail questions) to +5.6
# points (Claude 3.5, detail questions) (Table 2).
#
# **What we test.** The same four conditions (baseline, TD, TD+TC with spaCy tags, TD+TC
# with LLM tags) built by `longctx.tagging` and `longctx.tasks.tag_needles` for any reader:
# the project's own NoLiMa-style needle set (NoLiMa's files are not reachable here; the
# reader takes NoLiMa's `needle_set.json` format, so theirs runs unchanged), needles at
# rotating depths in Paul Graham essay haystacks measured in the reader's tokens, NoLiMa's
# `contains` score, Wilson intervals per cell, paired bootstrap intervals and sign-flip
# tests for every change, and a bootstrap interval on the paper's extremum drop rate. We
# also measure how many tokens tags add, where the needle sits, and tagging combined with
# query-aware contextualization (the question before and after the context).
#
# **What differs.** The reader is Qwen2.5-Coder-0.5B-Instruct on a 2-core CPU (the paper's
# are Claude 3.5/3.7 Sonnet), so lengths are 250, 500 and 1,000 tokens instead of 250 to
# 32K, and 30 of the project's 48 needle questions are asked per cell (NoLiMa: 58 pairs at
# 26 depths), each at one rotating depth. The comparisons the findings rest on are asked
# again on 154 questions (the 48 and 106 more written to the same rules): TD+TC against the
# baseline at 2,000 tokens, and the paper's 250-token TD and TD+TC comparisons. The LLM
# tagger is the same 0.5B model with the paper's IE prompt (Figure 8); the classification
# prompt (Figure 7) is implemented and run in CI, but the 0.5B model kept every category
# inside its `<thinking>` reasoning, leaving nothing to parse, and costs 160 generated
# tokens per chunk. 420 generations,
# about 50 minutes on a 2-core CPU, and 308 more at 2,000 tokens (35 minutes). That
# 0.5B tagger fails (it copies its prompt's example tags), so the LLM-tag arm below measures a failed tagger, not LLM tagging; it is kept
# because it shows what wrong tags do to a reader, and it is not counted as evidence
# about the paper's claim.

# %% tags=["parameters", "hide-input"]
model = "qwen2.5-coder-0.5b-instruct"  # reader: alias, .gguf path, checkpoint directory or hub id
needle_set = "longctx"  # the project's set, or the path of NoLiMa's needle_set.json
num_cases = 30  # seeded needle questions (None: all 48 of the project's set)
lengths = [250, 500, 1000]  # haystack tokens in the reader's tokenizer (the paper: 250, 500, 16K, 32K)
variants = ["baseline", "td", "td_tc_spacy", "td_tc_llm"]
depths = [0.0, 0.25, 0.5, 0.75, 1.0]  # needle depth; case i sits at depths[i % 5] ("rotate")
depth_mode = "rotate"  # "all" asks every case at every depth
query_aware_variants = ["baseline", "td_tc_llm"]  # asked again with the question also before the context
query_aware_lengths = [1000]
long_length = 2000  # the headline pair's haystack tokens (None: skip it)
long_needle_sets = ["longctx", "longctx-extra"]  # every case of these sets is asked at long_length
long_num_cases = None  # per set (None: all; 48 + 106 cases)
long_variants = ["baseline", "td_tc_spacy"]
short_length = 250  # the paper's TD and TD+TC comparisons asked again on every case above (None: skip)
short_variants = ["baseline", "td", "td_tc_spacy"]
tagger_model = "qwen2.5-coder-0.5b-instruct"  # the LLM tagger (privileged categories, Figure 9)
llm_tag_method = "ie"  # ie (Figure 8), classification (Figure 7) or hybrid (both merged)
chunk_strategy = "sentence"  # sentences packed up to chunk_chars characters
chunk_chars = 500
novelqa_dir = None  # a NovelQA checkout (Data/, Books/) to run the multiple-choice part
novelqa_max_book_tokens = 6000
seed = 0
device = "auto"
backend = "hf"  # hf (transformers), llamacpp (the GGUF file in llama.cpp) or openai (a server)
backend_url = None  # the server of the openai backend, e.g. http://127.0.0.1:8000/v1
dtype = "auto"
batch_size = 8
results_dir = "data/results"
experiment = "tag_needles"

# %% tags=["remove-cell"]
import warnings

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from longctx import plots
from longctx.backends import load_backend, spec
from longctx.chapters import scale
from longctx.chapters import tag_needles as chapter
from longctx.models import load_model, load_tokenizer
from longctx.paths import repo_root, resolve
from longctx.report import n_for_half_width, points_ci, show
from longctx.results import provenance
from longctx.store import ResultsStore, run_requests
from longctx.tagging import load_categories, tagging_report
from longctx.tasks import tag_needles as tn

warnings.filterwarnings("ignore", category=FutureWarning)
results_path = resolve(results_dir)
pd.set_option("display.precision", 1)
paper = pd.read_csv(repo_root() / "data" / "paper" / "tag_needles.csv")
loaded = {}
backend_spec = spec(backend, backend_url)


def load():
    """The reader, loaded once and only if some generation or tag is missing."""
    if "lm" not in loaded:
        loaded["lm"] = load_backend(model, backend_spec, device=device, dtype=dtype)
    return loaded["lm"]


def load_tagger():
    # The LLM tagger runs on hf (its tags are cached by chunk, whatever reads them).
    return load() if tagger_model == model and backend == "hf" else load_model(tagger_model, device=device, dtype=dtype)


def scored_rows(requests):
    """The requests' stored rows (generated first where missing), scored; empty without requests."""
    if not requests:
        return pd.DataFrame()
    store = ResultsStore.for_model(results_path, model, experiment, backend_spec)
    return pd.DataFrame(tn.score_rows(run_requests(requests, store, model=model, load=load, backend=backend_spec,
                                                   batch_size=batch_size)))


# %% [markdown]
# The prompts come from `longctx.tasks.tag_needles`: needles placed in Paul Graham essay
# haystacks measured in the reader's tokens, tagged by spaCy and by the LLM tagger (tags
# are cached by chunk), one request per (question, length, variant). Rows already stored
# are reused; the reader is loaded only if something is missing.

# %%
params = {name: globals()[name] for name in scale("tag_needles", "book")}
text, cases = chapter.cases_for(params)
all_cases = tn.load_cases(needle_set, avoid_text=text, seed=seed)
tokenizer = load_tokenizer(model)
taggers = chapter.taggers_for(params, results_path, load_tagger=load_tagger, batch_size=batch_size)
requests = chapter.requests_for(params, tokenizer=tokenizer, taggers=taggers, cases=cases, text=text)
scored = scored_rows(requests)
main = scored[~scored["query_aware"]]

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Share of needle questions answered with the right character (NoLiMa's contains) against haystack length, per prompt variant; 30 questions per point, 95% Wilson bands. TD: tag definitions in the system prompt; TD+TC: definitions plus tagged context. The LLM-tagger arm uses a 0.5B tagger that failed (see the tagging section).", "name": "fig-tag-length"}, "image": {"alt": "Line chart of accuracy against haystack tokens (250, 500, 1000). The baseline falls from 77 to 50 percent; TD stays between 30 and 40; TD+TC with spaCy tags between 47 and 57; the LLM-tag arm is 0 at every length."}}
accuracy = tn.accuracy_table(main, by=["model", "variant", "length"])
accuracy["label"] = accuracy["variant"].map(tn.VARIANT_LABELS)
fig = plots.accuracy_by_position(accuracy, x="length", facet="model", hue="label", facet_title="{}",
                                 xlabel="haystack tokens")
fig.axes[0].set_xscale("log")
fig.axes[0].set_xticks(lengths, [str(n) for n in lengths])
fig.axes[0].minorticks_off()
plt.show()

# %% [markdown]
# {numref}`fig-tag-length` is the chapter's result for this reader: tag definitions cost
# accuracy instead of adding it, spaCy tags win part of that back, and wrong tags (the
# failed LLM tagger's) send the reader to the wrong place every time.
#
# (tag-headline)=
# ## Each variant against the baseline (Table 1)
#
# Change in points on the same questions, with a paired bootstrap 95% interval over
# questions and a sign-flip p-value, next to the paper's change for Claude 3.5 Sonnet at the
# same length where it reports one.

# %% tags=["hide-input"]
gains = tn.versus_baseline(main, seed=seed)
claude = paper[(paper["table"] == 1) & (paper["model"] == "Claude 3.5 Sonnet")].set_index(["variant", "setting"])["value"]


def paper_change(variant, length):
    try:
        return f"{claude[(variant, str(length))] - claude[('baseline', str(length))]:+.1f}"
    except KeyError:
        return "—"


show(pd.DataFrame([{"length": r.length, "variant": tn.VARIANT_LABELS[r.variant],
                    "ours: change (pts, 95% CI)": points_ci(r.change, r.ci_low, r.ci_high),
                    "sign-flip p": f"{r.p_sign_flip:.3g}", "paper, Claude 3.5 Sonnet": paper_change(r.variant, r.length)}
                   for r in gains.itertuples()]),
     notes="The paper reports 250, 500, 16K and 32K tokens; we run 250 to 1,000.")
pairs = main[main["variant"].isin(["baseline", "td_tc_spacy"])].pivot_table(
    index=["example_id", "length"], columns="variant", values="correct")
need = {k: n_for_half_width(g["td_tc_spacy"] - g["baseline"]) for k, g in pairs.groupby(level="length")}
show(pd.DataFrame([{"comparison": "TD+TC (spaCy) minus baseline", "length": k, "questions": len(g),
                    "questions for +-10 pts": need[k]} for k, g in pairs.groupby(level="length")]),
     notes="From the observed per-question differences. The project's needle set has 48 questions; the "
           "headline pair is therefore asked again below on 154 (the set plus 106 extra pairs written to the same "
           "rules), at 2,000 tokens.")

# %% [markdown]
# (tag-long)=
# ## The headline pair at 2,000 tokens, on 154 questions
#
# The grid above asks 30 questions per cell, too few to decide any change (the table
# above gives the size each one would need). The headline comparison, TD+TC with spaCy
# tags against the untagged baseline, is therefore run once more at the longest length
# this CPU affords for 300 prompts, 2,000 tokens, on every question of the project's set
# and of its extension (`longctx-extra`: 106 more needle questions written to the same
# rules, no literal overlap, one-hop and two-hop), each at one rotating depth.

# %% tags=["hide-input"]
long_requests = chapter.long_requests(params, tokenizer=tokenizer, taggers=taggers, text=text)
long_scored = scored_rows(long_requests)
if long_requests:
    long_acc = tn.accuracy_table(long_scored, by=["variant", "hop"]).pipe(
        lambda t: pd.concat([tn.accuracy_table(long_scored, by=["variant"]).assign(hop="all"), t]))
    show(long_acc.assign(variant=long_acc["variant"].map(tn.VARIANT_LABELS),
                         **{"accuracy (95% CI)": [f"{a:.2f} [{lo:.2f}, {hi:.2f}]" for a, lo, hi in
                                                  zip(long_acc["accuracy"], long_acc["ci_low"], long_acc["ci_high"])]})
         [["variant", "hop", "n", "accuracy (95% CI)"]],
         notes=f"{long_length} haystack tokens; Wilson intervals.")
    long_gain = tn.versus_baseline(long_scored, seed=seed).iloc[0]
    t1_paper = paper[paper["table"] == 1].set_index(["model", "variant", "setting"])["value"]
    long_pairs = long_scored.pivot_table(index="example_id", columns="variant", values="correct")
    long_diff = long_pairs[long_variants[1]] - long_pairs[long_variants[0]]
    show(pd.DataFrame([{"comparison": f"{tn.VARIANT_LABELS[long_variants[1]]} minus baseline",
                        "questions": len(long_diff),
                        "change (pts, 95% CI)": points_ci(long_gain.change, long_gain.ci_low, long_gain.ci_high),
                        "half-width": round((long_gain.ci_high - long_gain.ci_low) / 2, 1),
                        "sign-flip p": f"{long_gain.p_sign_flip:.3g}",
                        "discordant questions": int((long_diff != 0).sum()),
                        **{f"paper, {m} at 500 / 16K": " / ".join(
                            f"{t1_paper[(m, long_variants[1], s_)] - t1_paper[(m, 'baseline', s_)]:+.1f}"
                            for s_ in ("500", "16000")) for m in ("Claude 3.5 Sonnet", "Claude 3.7 Sonnet")}}]),
         notes="Paired over questions: bootstrap interval and sign-flip p over the per-question differences. "
               "The paper's changes bracket our length (it reports no length between 500 and 16K).")

# %% [markdown]
# (tag-short)=
# ## The paper's 250-token comparisons, on 154 questions
#
# The paper's clearest gains are at its shortest length: tag definitions alone (TD) +10.2
# points and TD+TC with spaCy tags +7.6 for Claude 3.5 Sonnet at 250 tokens. The grid above
# asks them on 30 questions, too few to size either change, so both are asked again at 250
# tokens on the same 154 questions as the headline pair, each question at its rotating depth
# in that list (a grid question may sit at another depth there, so the two sets of rows are
# kept apart).

# %% tags=["hide-input"]
short_requests = chapter.short_requests(params, tokenizer=tokenizer, taggers=taggers, text=text)
short_scored = scored_rows(short_requests)
if short_requests:
    short_gains = tn.versus_baseline(short_scored, seed=seed).set_index("variant")
    short_pairs = short_scored.pivot_table(index="example_id", columns="variant", values="correct")
    short_acc = 100 * short_pairs.mean()
    show(pd.DataFrame([{"comparison": f"{tn.VARIANT_LABELS[v]} minus baseline", "n": int(g.n),
                        "accuracy (%)": f"{short_acc[v]:.1f} vs {short_acc['baseline']:.1f}",
                        "change (pts, 95% CI)": points_ci(g.change, g.ci_low, g.ci_high),
                        "half-width": round((g.ci_high - g.ci_low) / 2, 1), "sign-flip p": f"{g.p_sign_flip:.3g}",
                        "discordant": int((short_pairs[v] != short_pairs["baseline"]).sum()),
                        "n for +-10 pts": n_for_half_width(short_pairs[v] - short_pairs["baseline"]),
                        "paper (Claude 3.5)": paper_change(v, short_length)}
                       for v, g in short_gains.iterrows()]),
         notes=f"{short_length} haystack tokens; n: questions, each at one depth; accuracy: the variant vs the "
               "baseline; discordant: questions whose answer changes. Paired over questions: bootstrap interval and "
               "sign-flip p over the per-question differences; n for +-10 pts from their observed spread.")

# %% [markdown]
# The paper's Table 1 in full (Claude 3.5 / 3.7 Sonnet on NoLiMa+; "td_tc_llm" is its
# privileged LLM tagging), and ours in the same layout:

# %% tags=["hide-input"]
t1 = paper[paper["table"] == 1].pivot_table(index=["model", "variant"], columns="setting", values="value", sort=False)
show(t1.reset_index().rename(columns={"drop_rate": "drop rate (%)"}))
ours = (accuracy.pivot_table(index="variant", columns="length", values="accuracy") * 100).round(1)
show(ours.reindex([v for v in variants if v in ours.index]).rename(index=tn.VARIANT_LABELS).reset_index(),
     notes="Ours: accuracy (%) at each haystack length, 30 questions per cell.")

# %% [markdown]
# ## Drop from the shortest to the longest context
#
# The paper's extremum drop rate, `(acc_short - acc_long) / acc_short`, in percent, with a
# 95% bootstrap interval over needle questions (each question's two answers stay paired).

# %% tags=["hide-input"]
drops = tn.drop_rates(main, seed=seed)
show(drops.assign(variant=drops["variant"].map(tn.VARIANT_LABELS)).round(1))

# %% [markdown]
# ## The needle set
#
# Written for this project after NoLiMa's design (Modarressi et al., 2025), in its file
# format (`lib/longctx/tasks/tag_needle_set.json`). Each needle links a character to a
# well-known landmark, diet or drink; the question asks about a city, region, food or
# drink that the needle never names. Landmark needles come with a one-hop question (the
# landmark's city) and a two-hop question (the city's country or region). The facts were
# chosen to be common knowledge, the examples in the tag definitions avoid all of them,
# and a test checks that no question shares a content word with its needle. Characters
# come from NoLiMa-style name lists, seeded per needle, skipping any name that occurs in
# the haystack.

# %% tags=["hide-input"]
show(tn.needle_set_summary(all_cases).rename(columns={"cases": "in the set"})
     .merge(tn.needle_set_summary(cases).rename(columns={"cases": "asked here"}), how="left").fillna(0))
show(pd.DataFrame([{"needle": c.needle, "question": c.question, "answer": c.answer, "hop": c.hop}
                   for c in cases[:6]]),
     notes=f"Needle/question pairs sharing a content word: {sum(bool(tn.literal_overlap(c)) for c in all_cases)}.")

# %% [markdown]
# ## Tagging the haystack
#
# The haystack is cut into sentence chunks (packed up to `chunk_chars` characters); the
# needle is one more chunk at its depth. Each distinct chunk is tagged once: spaCy maps
# its 18 entity labels to the paper's tag names (Figure 10); the LLM tagger answers the
# paper's IE prompt with the five privileged categories (Figure 9), and only the leading
# tags of its answer are read, so it can never alter the text. LLM tags are cached in
# `results_dir/<tagger>/tags/`.

# %% tags=["hide-input"]
longest = tn.haystack_chunks(tokenizer, max(lengths), strategy=chunk_strategy, max_chars=chunk_chars, text=text)
chunks = longest + [c.needle for c in cases]
tag_stats = []
for kind in ("spacy", "llm"):
    if getattr(taggers, kind) is None:
        continue
    tags = taggers.tags(kind, chunks)
    report = tagging_report(chunks, tags)
    needle_tagged = sum(1 for t in tags[len(longest):] if t)
    tag_stats.append({"tagger": kind, "haystack chunks": len(longest), "haystack chunks tagged":
                      sum(1 for t in tags[:len(longest)] if t), "needles tagged": f"{needle_tagged}/{len(cases)}",
                      "tags per tagged chunk": round(report.tags / max(1, report.tagged_chunks), 1),
                      "most used tags": ", ".join(sorted(report.by_tag, key=report.by_tag.get, reverse=True)[:4])})
show(pd.DataFrame(tag_stats))
if taggers.llm is not None:  # which haystack chunks the LLM tagger marked, and how
    llm_tags = taggers.tags("llm", longest)
    show(pd.DataFrame([{"chunk": k, "starts": c.strip()[:70], "LLM tags": t}
                       for k, (c, t) in enumerate(zip(longest, llm_tags)) if t]),
         notes="Haystack chunks the LLM tagger tagged.")
example = next((r for r in requests if r.condition["variant"] == "td_tc_spacy"), None)
if example is not None:
    at = example.prompt.find(next(c.needle for c in cases if c.id == example.example_id))
    display(Markdown("A spaCy-tagged needle in its context:\n\n```text\n" + example.prompt[max(0, at - 300): at + 200]
                     + "\n```"))

# %% [markdown]
# What the LLM tagger said about the first needles (its raw IE answers, from the cache).
# The 0.5B tagger fails: it tags none of the landmark needles and copies its prompt's
# example tags onto the diet and drink ones. The TD+TC (LLM) arm therefore measures a
# failed tagger, and the findings page does not count it as evidence about LLM tagging; a
# stronger tagger (the 1.5B model, or the paper's) is a parameter change (`tagger_model`).

# %% tags=["hide-input"]
if taggers.llm is not None:
    import json

    cache_rows = [json.loads(line) for line in taggers.caches["llm"].path.read_text().splitlines()]
    by_start = {r["chunk_start"]: r for r in cache_rows if r["tagger"] == taggers.llm.id}
    show(pd.DataFrame([{"needle": c.needle, "tags": by_start.get(c.needle[:80], {}).get("tags"),
                        "raw answer": json.loads(by_start.get(c.needle[:80], {}).get("raw", "{}"))}
                       for c in cases[:6]]))

# %% [markdown]
# ## Prompt sizes and provenance

# %% tags=["hide-input"]
display(Markdown(provenance(scored, results_path, experiment) + "; generated on "
                 + ", ".join(sorted(set(scored["device"] + " " + scored["dtype"])))
                 + f", greedy decoding, needle set `{needle_set}`, seed {seed}"))
show(main.groupby(["variant_label", "length"])[["prompt_tokens", "context_tokens", "tag_tokens"]].mean().round(1)
     .reset_index().rename(columns={"variant_label": "variant"}), notes="Mean tokens per prompt.")

# %% [markdown]
# What the wrong answers were: the most frequent wrong answers per variant (the haystack
# has its own people, so a reader that misses the needle often names one of them).

# %% tags=["hide-input"]
wrong = main[main["correct"] == 0]
show(wrong.groupby(["variant_label", "length"])["output"]
     .agg(lambda s: "; ".join(f"{k!r} x{v}" for k, v in s.value_counts().head(3).items())).rename("top wrong answers")
     .reset_index().rename(columns={"variant_label": "variant"}))

# %% [markdown]
# ## Where the needle sits
#
# Depths rotate over the questions: each question keeps one depth at all three lengths, so
# each depth holds 6 questions x 3 lengths. The intervals below resample whole questions
# (the three lengths of one question are not independent), so read the profile as coarse.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Accuracy against the needle's depth (percent of the context before it), pooled over the three lengths; each point is 6 questions x 3 lengths, with a 95% bootstrap interval over questions.", "name": "fig-tag-depth"}, "image": {"alt": "Line chart of accuracy against needle depth per variant; the intervals are wide and no U-shape shows."}}
by_depth = tn.accuracy_table(main, by=["model", "variant", "depth"])
by_depth["depth"] = (100 * by_depth["depth"]).round().astype(int)  # percent of the context before the needle
by_depth["label"] = by_depth["variant"].map(tn.VARIANT_LABELS)
plots.accuracy_by_position(by_depth, x="depth", facet="model", hue="label", facet_title="{} (all lengths)",
                           xlabel="needle depth (% of the context before it)")
plt.show()

# %% [markdown]
# ## Tag overhead against gain
#
# Tokens the tags add to the context, and what they buy against the baseline and against
# tag definitions alone (TD).

# %% tags=["hide-input"]
overhead = tn.overhead_vs_gain(main, seed=seed)
tagged = overhead[overhead["variant"].str.startswith("td_tc")]
show(tagged.assign(variant=tagged["variant"].map(tn.VARIANT_LABELS), tag_tokens=tagged["tag_tokens"].round(1),
                   tag_share=(100 * tagged["tag_share"]).round(1),
                   change=[points_ci(c, lo, hi) for c, lo, hi in zip(tagged["change"], tagged["ci_low"], tagged["ci_high"])])
     [["variant", "length", "tag_tokens", "tag_share", "change", "p_sign_flip"]]
     .rename(columns={"tag_share": "tag share of context (%)", "change": "change vs baseline (pts, 95% CI)"}).round(3))
against_td = tn.versus_baseline(main[main["variant"] != "baseline"], control="td", seed=seed)
show(against_td.assign(variant=against_td["variant"].map(tn.VARIANT_LABELS),
                       change=[points_ci(c, lo, hi) for c, lo, hi in
                               zip(against_td["change"], against_td["ci_low"], against_td["ci_high"])])
     [["length", "variant", "change", "p_sign_flip"]].rename(columns={"change": "change vs TD (pts, 95% CI)"}).round(3))

# %% [markdown]
# ## Beyond the paper: tags with query-aware contextualization
#
# Lost in the Middle's query-aware contextualization puts the question before the context
# as well as after it. Asked with and without it, on the same questions and length:

# %% tags=["hide-input"]
qac_rows = scored[scored["length"].isin(query_aware_lengths) & scored["variant"].isin(query_aware_variants)]
if qac_rows["query_aware"].any():
    qac_table = qac_rows.pivot_table(index="variant", columns="query_aware", values="correct", aggfunc="mean") * 100
    show(qac_table.rename(index=tn.VARIANT_LABELS, columns={False: "question after", True: "question before and after"})
         .round(1).reset_index(), notes="Accuracy (%).")
    qac_rows = qac_rows.assign(arm=qac_rows["variant"] + qac_rows["query_aware"].map({True: "+qac", False: ""}))
    qac_gain = tn.versus_baseline(qac_rows.assign(variant=qac_rows["arm"]), control="baseline", seed=seed)
    show(qac_gain.round(3))

# %% [markdown]
# ## NovelQA multiple choice (Table 2)
#
# NovelQA is not reachable here; with a checkout (`novelqa_dir`, NovelQA's `Data/` and
# `Books/` layout), each question is asked with the paper's Figure 4 prompt, the novel
# truncated to `novelqa_max_book_tokens`, and scored by the chosen letter.

# %% tags=["hide-input"]
if novelqa_dir:
    questions, books = tn.read_novelqa(resolve(novelqa_dir))
    nq_variants = [v for v in variants if v != "td_tc_llm"]  # the paper tags NovelQA with spaCy only
    nq_requests = tn.novelqa_requests(questions, books, tokenizer=tokenizer, variants=nq_variants,
                                      max_book_tokens=novelqa_max_book_tokens, taggers=taggers)
    nq_store = ResultsStore.for_model(results_path, model, "novelqa", backend_spec)
    nq = pd.DataFrame(tn.score_novelqa(run_requests(nq_requests, nq_store, model=model, load=load, backend=backend_spec,
                                                    batch_size=batch_size)))
    show((nq.pivot_table(index="variant", columns="complexity", values="correct") * 100).round(1)
         .rename(index=tn.VARIANT_LABELS).reset_index(), notes="Ours: accuracy (%) by question complexity.")
else:
    display(Markdown("`novelqa_dir` is not set, so the NovelQA part did not run; the paper's Table 2:"))
show(paper[paper["table"] == 2].pivot_table(index=["model", "variant"], columns="setting", values="value",
                                            sort=False).reset_index(), notes="The paper's Table 2 (NovelQA+, accuracy %).")

# %% tags=["remove-cell"]
# The findings below quote these numbers; fail the build if the committed results change them.
BOOK_RUN = (model == "qwen2.5-coder-0.5b-instruct" and backend == "hf" and num_cases == 30 and lengths == [250, 500, 1000]
            and needle_set == "longctx" and llm_tag_method == "ie")
checked = 0
if BOOK_RUN:
    acc = ours.round(1)
    assert list(acc.loc["baseline"]) == [76.7, 76.7, 50.0]
    assert list(acc.loc["td"]) == [30.0, 36.7, 40.0]
    assert list(acc.loc["td_tc_spacy"]) == [56.7, 46.7, 46.7]
    assert list(acc.loc["td_tc_llm"]) == [0.0, 0.0, 0.0]
    d = drops.set_index("variant").round(1)
    assert list(d.loc["baseline", ["drop_rate", "ci_low", "ci_high"]]) == [34.8, 5.3, 58.3]
    assert list(d.loc["td_tc_spacy", ["drop_rate", "ci_low", "ci_high"]]) == [17.6, -16.7, 44.4]
    g = gains.set_index(["length", "variant"]).round(3)
    assert list(g.loc[(250, "td"), ["change", "ci_low", "ci_high", "p_sign_flip"]]) == [-46.667, -63.333, -26.667, 0.0]
    assert list(g.loc[(500, "td_tc_spacy"), ["change", "ci_low", "ci_high"]]) == [-30.0, -53.333, -6.667]
    assert round(g.loc[(500, "td_tc_spacy"), "p_sign_flip"], 3) == 0.022
    assert list(g.loc[(1000, "td"), ["change", "ci_low", "ci_high"]]) == [-10.0, -23.333, 0.0]
    t = against_td.set_index(["length", "variant"]).round(1)
    assert list(t.loc[(250, "td_tc_spacy"), ["change", "ci_low", "ci_high"]]) == [26.7, 0.0, 53.3]
    top_wrong = wrong.groupby("variant")["output"].agg(lambda s: s.value_counts().index[0])
    assert set(top_wrong) == {"Bronnie Ware"} and (wrong[wrong["variant"] == "td_tc_llm"]["output"] == "Bronnie Ware").all()
    stats = pd.DataFrame(tag_stats).set_index("tagger")
    assert stats.loc["llm", "needles tagged"] == "5/30" and stats.loc["llm", "haystack chunks tagged"] == 4
    assert stats.loc["spacy", "needles tagged"] == "30/30"
    q = qac_gain.set_index("variant").round(3)
    assert list(q.loc["baseline+qac", ["change", "ci_low", "ci_high", "p_sign_flip"]]) == [-36.667, -60.0, -10.0, 0.024]
    assert round(qac_table.loc["td_tc_llm", True], 1) == 16.7
    tokens = main.groupby(["variant", "length"])["tag_tokens"].mean().round(1)
    assert tokens[("td_tc_spacy", 1000)] == 71.5 and tokens[("td_tc_spacy", 250)] == 38.2, tokens
    assert round(tokens[("td_tc_llm", 1000)]) == 77 and round(tokens[("td_tc_llm", 250)]) == 39
    depth_base = by_depth[by_depth["variant"] == "baseline"].set_index("depth")
    assert (depth_base["units"] == 6).all() and (depth_base["n"] == 18).all()
    assert (depth_base["interval"] == "cluster bootstrap").all()
    assert list((100 * depth_base["accuracy"]).round(1)) == [72.2, 55.6, 66.7, 83.3, 61.1]
    checked = 40
if BOOK_RUN and long_length == 2000 and long_num_cases is None and long_variants == ["baseline", "td_tc_spacy"]:
    long_by = long_scored.groupby("variant")["correct"]
    assert long_by.sum().to_dict() == {"baseline": 88, "td_tc_spacy": 35} and (long_by.size() == 154).all()
    assert len(long_diff) == 154 and round(long_gain.change, 1) == -34.4
    assert (round(long_gain.ci_low, 1), round(long_gain.ci_high, 1)) == (-42.9, -26.6) and long_gain.p_sign_flip < 0.001
    assert round((long_gain.ci_high - long_gain.ci_low) / 2, 1) == 8.1
    assert int((long_diff != 0).sum()) == 55 and int((long_diff > 0).sum()) == 1
    long_wrong = long_scored[long_scored["correct"] == 0].groupby("variant")["output"].agg(
        lambda o: (o.str.strip() == "Marc Andreessen").sum())
    assert long_wrong.to_dict() == {"baseline": 23, "td_tc_spacy": 73}
    assert (long_scored["correct"] == 0).groupby(long_scored["variant"]).sum().to_dict() == {"baseline": 66,
                                                                                          "td_tc_spacy": 119}
    assert round(long_scored.groupby("variant")["prompt_tokens"].mean()).to_dict() == {"baseline": 2092,
                                                                                      "td_tc_spacy": 2875}
    at_start = long_scored[long_scored["depth"] == 0.0].groupby("variant")["correct"].mean().round(2).to_dict()
    assert at_start == {"baseline": 0.10, "td_tc_spacy": 0.03}, at_start
    checked += 16
if BOOK_RUN and long_num_cases is None and short_length == 250 and short_variants == ["baseline", "td", "td_tc_spacy"]:
    assert short_pairs.shape == (154, 3) and (short_gains["n"] == 154).all()
    assert short_acc.round(1).to_dict() == {"baseline": 66.2, "td": 31.8, "td_tc_spacy": 57.1}, short_acc
    sg = short_gains.round(1)
    assert list(sg.loc["td", ["change", "ci_low", "ci_high"]]) == [-34.4, -42.2, -26.0] and short_gains.loc["td", "p_sign_flip"] < 0.001
    assert list(sg.loc["td_tc_spacy", ["change", "ci_low", "ci_high"]]) == [-9.1, -19.5, 1.3]
    assert round(short_gains.loc["td_tc_spacy", "p_sign_flip"], 2) == 0.13
    assert round((short_gains.loc["td_tc_spacy", "ci_high"] - short_gains.loc["td_tc_spacy", "ci_low"]) / 2, 1) == 10.4
    short_moves = {v: ((short_pairs[v] > short_pairs["baseline"]).sum(), (short_pairs[v] < short_pairs["baseline"]).sum())
                   for v in ("td", "td_tc_spacy")}
    assert short_moves == {"td": (3, 56), "td_tc_spacy": (29, 43)}, short_moves
    assert n_for_half_width(short_pairs["td_tc_spacy"] - short_pairs["baseline"]) == 178
    short_ware = short_scored[short_scored["correct"] == 0].groupby("variant")["output"].agg(
        lambda o: (o == "Bronnie Ware").sum()).to_dict()
    assert short_ware == {"baseline": 45, "td": 103, "td_tc_spacy": 66}, short_ware
    assert (short_scored["correct"] == 0).groupby(short_scored["variant"]).sum().to_dict() == {"baseline": 52, "td": 105,
                                                                                                "td_tc_spacy": 66}
    checked += 24
print(f"quoted numbers checked: {checked}")

# %% [markdown]
# ## What we found
#
# With Qwen2.5-Coder-0.5B-Instruct, 30 needle questions per cell at 250 to 1,000 tokens
# (intervals span 30-40 points, too wide for the 10-point target), and 154 questions for
# the headline pair at 2,000 tokens (half-width 8.1 points) and for the paper's 250-token
# comparisons (half-widths 8.1 and 10.4); longer haystacks need a GPU:
#
# * **The baseline already degrades with length.** 76.7% at 250 and 500 tokens, 50.0% at
#   1,000: an extremum drop rate of 34.8% (95% CI 5.3 to 58.3), where the paper's Claude
#   models lose 52-60% only by 32K tokens. All 15 wrong answers at 1,000 tokens name
#   Bronnie Ware, the nurse in the haystack's first essay: when the small reader misses
#   the needle it falls back on the one named person near the start of the context.
# * **Tag definitions hurt this reader.** TD, the paper's cheapest gain (+10.2 points for
#   Claude 3.5 at 250 tokens), costs the 0.5B model 46.7 points at 250 tokens (95% CI
#   -63.3 to -26.7, sign-flip p < 0.001) and 40.0 at 500; at 1,000 tokens the cost shrinks
#   to 10.0 (CI -23.3 to 0.0). With the definitions in its system prompt it answers
#   "Bronnie Ware" far more often (21 of its 21 wrong answers at 250 tokens).
# * **On 154 questions at 250 tokens the verdicts hold.** The baseline answers 66.2%, TD
#   31.8% and TD+TC with spaCy tags 57.1%. TD costs 34.4 points (95% CI -42.2 to -26.0,
#   sign-flip p < 0.001; 56 questions lost, 3 gained), where the paper's Claude 3.5 gains
#   10.2. TD+TC with spaCy tags costs 9.1 (CI -19.5 to +1.3, p = 0.13; 43 lost, 29 gained):
#   no direction is called, but the paper's +7.6 lies well outside the interval. That
#   interval is 10.4 points wide on each side, just over the target: the observed spread
#   needs 178 questions and the project has 154. The wrong answers are again "Bronnie Ware"
#   (45 of the baseline's 52, 103 of TD's 105, all 66 of TD+TC's).
# * **spaCy tags recover part of that, not more.** TD+TC with spaCy tags reaches 56.7 /
#   46.7 / 46.7%, still below the baseline (-20.0, -30.0 and -3.3 points; only the 500-token
#   gap excludes zero, p = 0.022) but 26.7 points above TD alone at 250 tokens (CI 0.0 to
#   53.3). Its drop rate, 17.6% (CI -16.7 to 44.4), is lower than the baseline's, but from
#   a lower start and with overlapping intervals: no evidence that tags flatten the curve.
# * **Wrong tags steer the reader to the wrong place.** The 0.5B IE tagger tagged none of
#   the landmark needles; it put its prompt's example tags (`<Drinks & Beverages><Foods>`)
#   on 5 of 30 needles (the diet and drink ones) and on 4 of 18 haystack chunks, among them
#   the Bronnie Ware chunk. Told by Figure 6's system prompt to look in the tagged
#   sections, the reader answered "Bronnie Ware" to all 90 TD+TC (LLM) questions: 0%
#   at every length. This arm measures a failed tagger, not LLM tagging: the paper's
#   privileged tags came from a strong LLM. What it does show is that wrong tags are worse
#   than none.
# * **Depth.** At these short lengths no lost-in-the-middle shape shows: the baseline gets
#   72.2 / 55.6 / 66.7 / 83.3 / 61.1% with the needle at 0 / 25 / 50 / 75 / 100% depth
#   (6 questions per depth, each at 3 lengths; intervals resample questions).
# * **Overhead.** spaCy tags add 38.2-71.5 tokens (7-15% of the context) and their 18
#   definitions about 480 more system-prompt tokens than TD's five; the LLM tags add
#   39-77 tokens. For this reader none of it buys accuracy over the plain prompt.
# * **Query-aware contextualization does not rescue it either.** Asking the question
#   before the context as well cuts the baseline at 1,000 tokens from 50.0% to 13.3%
#   (-36.7 points, CI -60.0 to -10.0, p = 0.024), as it did in the key-value chapter for
#   this reader; with the misleading LLM tags it moves 0.0% to 16.7%.
# * **At 2,000 tokens, on 154 questions, tags cost a third of the answers.** With every
#   question of the project's set and its extension (48 + 106), the baseline answers 88
#   (57%) and TD+TC with spaCy tags 35 (23%): -34.4 points (95% CI -42.9 to -26.6,
#   half-width 8.1, sign-flip p < 0.001). Of the 55 questions whose answer changes, 54
#   change for the worse. The paper's spaCy TD+TC gains are small and positive (+2.2 at
#   500 and +1.7 at 16K tokens for Claude 3.5 Sonnet); for this reader the direction is
#   the opposite ({ref}`findings`). The wrong answers are people the haystack names:
#   "Marc Andreessen" for 73 of the 119 tagged misses (23 of the baseline's 66), as if
#   the person tags drew the reader to tagged names. The tagged prompts are also longer
#   (2,875 vs 2,092 tokens on average, with the 18 definitions in the system prompt).
#   Both arms fail with the needle at the very start (10% and 3% at depth 0), where
#   the needle precedes the first essay's opening.
# * **NovelQA.** The reader for its multiple-choice files and the Figure 4 prompt are
#   tested on a project-written fixture (CI runs them end to end); NovelQA itself is not
#   reachable here, so Table 2 has no counterpart yet.
#
# These are findings about a 0.5B reader on CPU-sized contexts, not a test of the paper's
# claim for frontier models. To run the paper's lengths and a stronger tagger on a GPU:
#
# ```bash
# make run NB=notebooks/tag_needles.py MODEL=Qwen/Qwen2.5-7B-Instruct \
#     PARAMS="-p num_cases None -p lengths '[250, 500, 16000, 32000]' -p tagger_model Qwen/Qwen2.5-7B-Instruct -p llm_tag_method hybrid"
# ```
