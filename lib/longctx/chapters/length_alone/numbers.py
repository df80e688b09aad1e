"""The context-length-alone chapter's numbers: what its analysis computes from the rows (scored rows,
cells, estimates' sides, the numbers the prose quotes and the statements it makes)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...claims import (
    Estimate,
    read_claims,
    relative_change,
)
from ...metrics import wilson_interval
from ...report import (
    and_list,
    estimate_text,
    n_for_half_width,
    p_text,
    pct,
    pct_ci,
    points_ci,
)
from ...tasks import length_alone as la
from ...tasks import ruler_qa as rq
from ..contract import ChapterResult, Run
from . import analysis
from .design import EXPERIMENT, problems_for, ruler_questions

PREMISE_SCALE = "recitation-full"  # the recitations the la-* premises read


def longest_filler(params: dict) -> int:
    """The longest filler any GSM8K arm asks: the length the claims compare with none."""
    return max(n for arm in params["arms"] if "gsm8k" in arm["subtasks"] for n in arm["lengths"])


def gsm8k_correct(row: dict) -> float:
    """GSM8K's score: the output's final number equals the gold answer."""
    got = la.final_number(row["output"])
    try:
        return float(got is not None and float(got) == float(row["gold"][0]))
    except ValueError:
        return 0.0


PREMISE_FILLERS = ("essay", "whitespace", "mask")  # the claims whose premise is recitation


def premise_rows(run: Run) -> list[dict]:
    """The recitations a premise reads: this run's own and those its premise run
    (``PREMISE_SCALE``) plans, each planned row once."""
    own = run.rows(EXPERIMENT)
    more = run.premise.rows(EXPERIMENT) if run.premise is not None else []
    return list({r["key"]: r for r in own + more}.values())


def recitations(
    rows: list[dict], problems: dict[str, la.Problem], filler: str, length: int
) -> dict[str, dict[str, float]]:
    """Each of ``problems``' recitation at ``length`` tokens of ``filler`` between evidence and
    question, scored by the paper's exact match (evidence, question and both), by problem."""
    where = {"subtask": "gsm8k", "mode": "recite", "filler_tokens": length}
    where["filler"] = filler if length else "none"
    return {
        r["example_id"]: la.recitation_exact_match(r["output"], problems[r["example_id"]])
        for r in rows
        if r["example_id"] in problems and all(r["condition"].get(k) == v for k, v in where.items())
    }


def recited_thresholds() -> dict[str, float]:
    """The recitation rate (%) each claim's premise asks for (``data/paper/claims.csv``, read
    once), by claim id, for the claims whose premise has a recitation check."""
    return {
        claim.id: check.threshold(claim)
        for claim in read_claims()
        if claim.premise
        for check in claim.premise.checks
        if check.quantity == "recited"
    }


def recited_facts(
    rows: list[dict], problems: dict[str, la.Problem], filler: str, length: int, threshold: float
) -> dict[str, float]:
    """The paper's premise (section 3.2, Table 6): the percentage of ``problems`` whose
    evidence, analysis and question the reader recites word for word with ``filler`` of
    ``length`` tokens between evidence and question. With every recitation stored, the rate.
    With part stored, a bound only where it already decides the check whatever the rest
    recite (``recited:bound`` -1: at most, so below ``threshold``; +1: at least, so at or
    above it); else NaN, and the claim waits. No rate is ever estimated from a subset."""
    recited = recitations(rows, problems, filler, length)
    n, right = len(problems), sum(r["retrieval_em"] for r in recited.values())
    if set(recited) == set(problems):
        return {"recited": 100 * right / n}
    at_most, at_least = 100 * (right + n - len(recited)) / n, 100 * right / n
    if at_most < threshold:
        return {"recited": at_most, "recited:bound": -1.0}
    if at_least >= threshold:
        return {"recited": at_least, "recited:bound": 1.0}
    return {"recited": float("nan")}


def kept_facts(
    rows: list[dict], problems: dict[str, la.Problem], filler: str, length: int
) -> dict[str, float]:
    """The relative premise, beside the paper's absolute one: ``recited_none``, the % of
    ``problems`` recited word for word with no filler, and ``kept``, the % of those also
    recited word for word with ``length`` tokens of ``filler`` in place (paired by problem;
    NaN while either side's recitations are part stored, or when none is recited without
    filler, since then nothing can be kept)."""
    plain = recitations(rows, problems, filler, 0)
    if set(plain) != set(problems):
        return {"recited_none": float("nan"), "kept": float("nan")}
    right = [p for p, r in plain.items() if r["retrieval_em"]]
    out = {"recited_none": 100 * len(right) / len(problems), "kept": float("nan")}
    long = recitations(rows, problems, filler, length)
    if right and set(long) == set(problems):
        out["kept"] = 100 * sum(long[p]["retrieval_em"] for p in right) / len(right)
    return out


def premise_levels(rows: list[dict], problems: dict[str, la.Problem], length: int) -> pd.DataFrame:
    """The recitations behind the premise: with no filler (the reference), then each premise
    filler at ``length`` tokens; per arm the recitations stored, how many of them are word for
    word, and once all are stored the share of problems whose evidence, question and both are
    recited word for word (else NaN)."""
    out = []
    for filler, tokens in [("none", 0)] + [(f, length) for f in PREMISE_FILLERS]:
        got = recitations(rows, problems, filler, tokens)
        done = len(got) == len(problems)

        def share(field, got=got, done=done):
            return sum(r[field] for r in got.values()) / len(got) if done else float("nan")

        out.append(
            {
                "filler": filler,
                "tokens": tokens,
                "stored": len(got),
                "problems": len(problems),
                "right": int(sum(r["retrieval_em"] for r in got.values())),
                "evidence": share("evidence_em"),
                "question": share("question_em"),
                "both": share("retrieval_em"),
            }
        )
    return pd.DataFrame(out)


def _bound(r, estimates: dict[str, Estimate]) -> tuple[str, str] | None:
    """The bound a part-stored filler's claim reports (:func:`recited_facts`) and the counts
    behind it, in words; None where the stored recitations decide nothing yet."""
    est = estimates.get(f"la-{r.filler}")
    facts = est.facts if est is not None else {}
    side = {-1.0: "at most", 1.0: "at least"}.get(facts.get("recited:bound"))
    if r.stored == r.problems or side is None:
        return None
    return (
        f"{side} {facts['recited']:.1f}",
        f"{r.stored - r.right} of the {r.stored} stored differ, {r.right} recited word for word",
    )


def premise_table(
    levels: pd.DataFrame, paper: pd.DataFrame, estimates: dict[str, Estimate]
) -> pd.DataFrame:
    """The premise for people: per arm the recitations stored and the shares recited word for
    word (both with a Wilson 95% interval; for a part-stored filler whose check is decided,
    the bound its claim reports), beside the paper's GSM8K recitation with essay filler
    (Table 6: its 0-token rate, and that rate plus its change at 15K tokens)."""
    ret = paper[
        (paper["table"] == 6) & (paper["subtask"] == "gsm8k") & (paper["metric"] == "retrieval")
    ]
    cells = {m: g.set_index("length")["value"] for m, g in ret.groupby("model", sort=False)}
    theirs = {
        "none": "; ".join(f"{PAPER_READERS[m]} {c[0]:.1f}" for m, c in cells.items()),
        "essay": "; ".join(f"{PAPER_READERS[m]} {c[0] + c[15000]:.1f}" for m, c in cells.items())
        + " (15K)",
    }
    wait = "not measured yet"
    out = []
    for r in levels.itertuples():
        done = r.stored == r.problems
        lo, hi = wilson_interval(round(r.both * r.problems), r.problems) if done else (0.0, 0.0)
        label = "no filler (reference)" if r.filler == "none" else LABELS[r.filler, "between"]
        out.append(
            {
                "filler": label,
                "tokens": f"{r.tokens:,}",
                "recitations stored": f"{r.stored} of {r.problems}",
                "evidence word for word (%)": pct(r.evidence) if done else wait,
                "question word for word (%)": pct(r.question) if done else wait,
                "both: the premise (%, 95% interval)": (
                    pct_ci(r.both, lo, hi) if done else ": ".join(_bound(r, estimates) or (wait,))
                ),
                "the paper, essay filler (%)": theirs.get(r.filler, "not reported"),
            }
        )
    return pd.DataFrame(out)


def premise_words(levels: pd.DataFrame, estimates: dict[str, Estimate]) -> str:
    """The premise's state in a sentence: each filler's recitation rate (or the bound its
    stored recitations already give) against its claim's threshold, else how many are stored,
    and the command that stores the rest."""
    long = levels[levels["filler"] != "none"]
    thresholds = recited_thresholds()
    parts, undecided = [], False
    for r in long.itertuples():
        label = LABELS[r.filler, "between"]
        bound = _bound(r, estimates)
        if r.stored < r.problems and not bound:
            parts.append(f"{label}: {r.stored} of {r.problems} recitations stored")
            undecided = True
            continue
        fact = estimates[f"la-{r.filler}"].facts["recited"]
        threshold = thresholds[f"la-{r.filler}"]
        verdict = f"{'meets' if fact >= threshold else 'misses'} the paper's {threshold:g}%"
        parts.append(
            f"{label} {bound[0]}% ({bound[1]}; it {verdict} whatever the other "
            f"{r.problems - r.stored} recite)"
            if bound
            else f"{label} {fact:.1f}% ({verdict})"
        )
    words = f"Recited word for word at {long['tokens'].iloc[0]:,} tokens: " + "; ".join(parts) + "."
    reference = levels[levels["filler"] == "none"].iloc[0]
    if reference["stored"] == reference["problems"]:
        rate, threshold = 100 * reference["both"], thresholds["la-essay"]
        words += (
            f" With no filler at all the reader recites {rate:.1f}% of the problems word for word"
            + (
                f", already below the paper's {threshold:g}%: it cannot recite even without "
                "filler, so the three filler claims are untestable on this reader, whatever "
                "length does."
                if rate < threshold
                else "."
            )
        )
        kept = [
            (LABELS[f, "between"], estimates[f"la-{f}"].facts.get("kept", float("nan")))
            for f in PREMISE_FILLERS
            if f"la-{f}" in estimates
        ]
        if kept and all(k == k for _, k in kept):
            words += (
                " Of the problems it recites with no filler, it still recites "
                + and_list([f"{k:.1f}% with {label.lower()}" for label, k in kept])
                + f" (the relative premise: at least {threshold:g}%, paired by problem)."
            )
    if undecided:
        words += (
            " A claim whose recitations do not yet decide its premise stays unjudged (premise "
            f"not measured); `longctx reproduce --scale {PREMISE_SCALE} --chapters length_alone` "
            "stores the rest (`--scale recitation` first asks a few per filler, often enough "
            "to decide a reader that recites poorly)."
        )
    return words


def premise_outcome(verdicts: dict[str, str]) -> str:
    """Where the paper's recitation premise leaves the three between-filler claims, in a
    sentence: the fillers with which it fails, waits for rows, or holds."""

    def fillers(test) -> list[str]:
        return [LABELS[f, "between"] for f in PREMISE_FILLERS if test(verdicts.get(f"la-{f}"))]

    unjudged = ("premise not met", "premise not measured")
    failed = fillers(lambda v: v == "premise not met")
    waiting = and_list(fillers(lambda v: v == "premise not measured"))
    kept = fillers(lambda v: v not in unjudged)
    held = and_list(kept)
    stand = "whose verdicts stand" if len(kept) > 1 else "whose verdict stands"
    drops = "those drops are" if len(failed) > 1 else "that drop is"
    parts = [
        f"fails with {and_list(failed)} filler, so {drops} not evidence that length alone hurts "
        "despite perfect retrieval"
        if failed
        else "",
        f"is not measured yet with {waiting} filler" if waiting else "",
        f"holds with {held} filler, {stand} on it" if held else "",
    ]
    return "For this reader the premise " + "; it ".join(p for p in parts if p) + "."


LABELS = {
    ("none", "none"): "no filler",
    ("essay", "between"): "essay",
    ("whitespace", "between"): "whitespace",
    ("mask", "between"): "masked",
    ("whitespace", "before"): "whitespace, before the evidence",
    ("space_tokens", "between"): "single-space tokens",
    ("newline_tokens", "between"): "newline tokens",
}

VARIANTS = {
    "gsm8k": "GSM8K (paper's design)",
    "gsm8k_no_final_step": "GSM8K without the final step",
}

PAPER_READERS = {"Llama3-8B": "Llama-3-8B", "Mistral-7B-v0.3": "Mistral-7B"}

RULER_MODES = {
    "answer": "RULER's prompt, whole context",
    "retrieve_then_answer": "recite, then answer (paper)",
    "answer_from_named": "answer from the named documents (ours)",
}

RULER_TASKS = {"qa1": "QA1 (SQuAD)", "qa2": "QA2 (HotpotQA)"}


def solved(rows: list[dict], params: dict) -> pd.DataFrame:
    """The solve rows scored, with the figure's ``condition`` (filler kind and placement) and
    ``variant`` labels and ``problem`` (the GSM8K problem behind a no-final-step id)."""
    problems = [p for ps in problems_for(params).values() for p in ps]
    scored = pd.DataFrame(la.score_rows(rows, problems))
    solve = scored[scored["mode"] == "solve"].copy()
    solve["problem"] = solve["example_id"].str.replace(":no-final-step", "", regex=False)
    solve["condition"] = [LABELS[(f, p)] for f, p in zip(solve["filler"], solve["placement"])]
    solve["variant"] = solve["subtask"].map(VARIANTS)
    return solve


def placement(gsm: pd.DataFrame, paper: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Whitespace before the evidence minus no filler, and before minus between, beside Table 8."""
    drops = analysis.drops_from_short(gsm)
    before = drops[drops["placement"] == "before"].iloc[0]
    placed = analysis.paired_differences(
        gsm[gsm["filler"] == "whitespace"],
        condition="placement",
        control="between",
        treatment="before",
        by=["subtask", "filler_tokens"],
    ).iloc[0]
    t8 = paper[(paper["table"] == 8) & (paper["subtask"] == "gsm8k") & (paper["length"] == 15000)]
    shown = pd.DataFrame(
        [
            {
                "comparison": "whitespace before the evidence minus no filler",
                "problems": int(before["n"]),
                "ours (pts, 95% CI)": points_ci(
                    before["change"], before["ci_low"], before["ci_high"]
                ),
                "sign-flip p": p_text(before["p_sign_flip"]).removeprefix("p = "),
                "paper, Table 8 (15K)": ", ".join(
                    f"{m}: {v:+.1f}" for m, v in zip(t8["model"], t8["value"])
                ),
            },
            {
                "comparison": "before minus between (same whitespace)",
                "problems": int(placed["n"]),
                "ours (pts, 95% CI)": points_ci(
                    placed["change"], placed["ci_low"], placed["ci_high"]
                ),
                "sign-flip p": p_text(placed["p_sign_flip"]).removeprefix("p = "),
                "paper, Table 8 (15K)": "—",
            },
        ]
    )
    return shown, before, placed


def varsum_views(solve: pd.DataFrame, rows: list[dict], paper: pd.DataFrame) -> dict | None:
    """VarSum with its budget: accuracy, outputs at the cap, longest (correct) output; the drop
    with filler beside Table 6; the values of asked variables the outputs state, and how many
    match the evidence."""
    varsum = solve[solve["subtask"] == "varsum"]
    if varsum.empty:
        return None
    cap = la.budget("varsum", "solve")
    levels = varsum.groupby("filler_tokens").agg(
        problems=("correct", "size"),
        right=("correct", "sum"),
        accuracy=("correct", "mean"),
        at_cap=("new_tokens", lambda s: (s >= cap).sum()),
        longest=("new_tokens", "max"),
        longest_correct=("new_tokens", lambda s: s[varsum.loc[s.index, "correct"] == 1].max()),
    )
    drop = analysis.drops_from_short(varsum)
    vp = paper[
        (paper["subtask"] == "varsum") & (paper["table"] == 6) & (paper["metric"] == "accuracy")
    ].pivot_table(index="model", columns="length", values="value")
    paper_15k = ", ".join(
        f"{m}: {r[15000]:+.0f} (from {r[0]:.0f}%)" for m, r in vp.dropna(subset=[15000]).iterrows()
    )
    drops = pd.DataFrame(
        [
            {
                "comparison": f"{int(r.filler_tokens):,} essay tokens minus no filler",
                "problems": r.n,
                "ours (pts, 95% CI)": points_ci(r.change, r.ci_low, r.ci_high),
                "sign-flip p": p_text(r.p_sign_flip).removeprefix("p = "),
                "paper, Table 6 (15K)": paper_15k,
            }
            for r in drop.itertuples()
        ]
    )
    reads = (
        pd.DataFrame(
            [
                (r["condition"]["filler_tokens"], *la.varsum_values_read(r["prompt"], r["output"]))
                for r in rows
                if r["condition"]["subtask"] == "varsum" and r["condition"]["mode"] == "solve"
            ],
            columns=["filler_tokens", "stated", "right"],
        )
        .groupby("filler_tokens")
        .sum()
    )
    return {"cap": cap, "levels": levels, "drop": drop, "drops": drops, "reads": reads}


def ruler_views(ruler_rows: list[dict], params: dict, paper: pd.DataFrame) -> dict | None:
    """RULER QA1/QA2: each arm's scores, the paired changes beside Table 5, the recitations
    scored as retrieval, and the questions each comparison needs for ±10 points."""
    if not ruler_rows:
        return None
    scored = pd.DataFrame(rq.score_rows(ruler_rows, ruler_questions(params)))
    answers = scored[scored["mode"].isin(list(RULER_MODES))].assign(
        condition=lambda d: d["mode"].map(RULER_MODES), task=lambda d: d["subtask"].map(RULER_TASKS)
    )
    t5 = paper[paper["table"] == 5].pivot_table(
        index=["subtask", "length"], columns="metric", values="value"
    )
    steps = pd.concat(
        [
            analysis.paired_differences(
                scored, condition="mode", control="answer", treatment=m, by=["subtask", "length"]
            )
            .rename(columns={m: "second_step"})
            .assign(step=RULER_MODES[m], mode=m)
            for m in ["retrieve_then_answer", "answer_from_named"]
        ]
    )

    def paper_t5(subtask, length, step):
        if step != RULER_MODES["retrieve_then_answer"] or (subtask, length) not in t5.index:
            return "—"
        r = t5.loc[(subtask, length)]
        before, after = r["baseline"], r["retrieve_then_answer"]
        return f"{before:.1f} -> {after:.1f} ({after - before:+.1f})"

    steps_shown = pd.DataFrame(
        [
            {
                "task": RULER_TASKS[r.subtask],
                "tokens": f"{r.length:,}",
                "second step": r.step,
                "questions": r.n,
                "whole context (%)": f"{r.answer:.1f}",
                "second step (%)": f"{r.second_step:.1f}",
                "change (pts, 95% CI)": points_ci(r.change, r.ci_low, r.ci_high),
                "sign-flip p": p_text(r.p_sign_flip).removeprefix("p = "),
                "paper, GPT-4o (Table 5)": paper_t5(r.subtask, r.length, r.step),
            }
            for r in steps.itertuples()
        ]
    )
    recitations = scored[scored["mode"] == "recite"]
    recited = recitations.groupby("subtask").agg(
        questions=("example_id", "size"),
        names=("named", lambda s: (s > 0).mean()),
        supporting=("names_a_supporting", "mean"),
        copies=("copies_text", "mean"),
        copies_supporting=("copies_supporting", "mean"),
        identifies=("identifies", "mean"),
        answer=("answer_in_recitation", "mean"),
        tokens=("new_tokens", "median"),
        at_cap=("new_tokens", lambda t: (t >= rq.RECITE_TOKENS).sum()),
    )
    wide = scored.pivot_table(index=["subtask", "example_id"], columns="mode", values="correct")
    sizing = pd.DataFrame(
        [
            {
                "task": RULER_TASKS[t],
                "comparison": f"{RULER_MODES[m]} minus whole context",
                "questions": int(w[m].notna().sum()),
                "discordant": f"{(w[m] != w['answer']).mean():.0%}",
                "questions for ±10 pts": n_for_half_width((w[m] - w["answer"]).dropna()),
            }
            for t, w in wide.groupby(level="subtask")
            for m in ["retrieve_then_answer", "answer_from_named"]
        ]
    )
    return {
        "scored": scored,
        "answers": answers,
        "steps": steps,
        "steps_shown": steps_shown,
        "recited": recited,
        "sizing": sizing,
    }


FILLER_CLAIMS = ("la-essay", "la-whitespace", "la-mask")


def filler_losses(estimates: dict) -> dict:
    """What the fillers between evidence and question cost, in points, as the prose quotes
    it: the whitespace filler's loss, and the smallest to the largest loss of the three."""
    losses = [-estimates[c].difference for c in FILLER_CLAIMS if c in estimates]
    return {
        "la-between-loss-whitespace": f"{-estimates['la-whitespace'].difference:.0f}",
        "la-between-loss-range": f"{min(losses):.0f} to {max(losses):.0f}" if losses else "—",
    }


def times_papers(estimates: dict[str, Estimate]) -> str:
    """How many times each of the paper's models' drops ours is, over the three filler kinds
    between evidence and question: "4.0 to 16.5 times Llama-3-8B's relative drop and 1.4 to
    8.5 times Mistral-7B's" (relative to each no-filler accuracy where the paper's is in
    ``data/paper/paper_baselines.csv``, else in points)."""
    by_id = {c.id: c for c in read_claims()}
    per_model: dict[str, list[float]] = {}
    for claim_id in FILLER_CLAIMS:
        claim, est = by_id[claim_id], estimates[claim_id]
        ours, paper = relative_change(est, claim)
        # the paper states relative drops: where its baseline is known, sizes compare so
        first = (PAPER_READERS["Llama3-8B"], claim.paper_effect, ours, paper)
        others = [(model, effect, None, None) for model, effect in claim.other_effects]
        for model, effect, ours_share, paper_share in [first, *others]:
            if ours_share is not None and paper_share:
                per_model.setdefault(f"{model}'s relative drop", []).append(
                    ours_share / paper_share
                )
            elif effect:
                per_model.setdefault(f"{model}'s", []).append(est.difference / effect)
    return " and ".join(
        f"{min(r):.1f} to {max(r):.1f} times {model}" for model, r in per_model.items()
    )


def quoted(
    estimates: dict[str, Estimate],
    gsm: pd.DataFrame,
    solve: pd.DataFrame,
    before: pd.Series,
    placed: pd.Series,
    varsum: dict | None,
    ruler: dict | None,
    rows: list[dict],
    ruler_rows: list[dict],
    params: dict,
) -> dict:
    """Every number the chapter's prose quotes, by glue key."""
    acc = gsm.groupby("condition")["correct"].mean().mul(100)
    cut = solve[solve["subtask"] == "gsm8k_no_final_step"]
    short = gsm[gsm["filler_tokens"] == 0]
    longest = longest_filler(params)
    out = {
        "la-problems": int(short["problem"].nunique()),
        "la-rows": len(rows),
        "la-ruler-rows": len(ruler_rows),
        "la-filler": f"{longest:,}",
        "la-short-pct": f"{acc['no filler']:.1f}%",
        "la-short-correct": int(short["correct"].sum()),
        "la-no-step-pct": f"{100 * cut[cut['filler_tokens'] == 0]['correct'].mean():.1f}%",
        "la-no-step-correct": int(cut[cut["filler_tokens"] == 0]["correct"].sum()),
        "la-no-step-cap": la.budget("gsm8k_no_final_step", "solve"),
        "la-no-step-at-cap": int(
            (cut["new_tokens"] >= la.budget("gsm8k_no_final_step", "solve")).sum()
        ),
        "la-no-step-rows": len(cut),
        "la-before-pct": f"{acc.get('whitespace, before the evidence', float('nan')):.1f}%",
        "la-before-minus-between": f"{placed['change']:+.1f}",
        "la-token-level-pct": f"{max(acc.get('single-space tokens', 0), acc.get('newline tokens', 0)):.0f}%",
        "la-whitespace-pct": f"{acc.get('whitespace', float('nan')):.0f}%",
    }
    for kind, key in (("essay", "essay"), ("whitespace", "whitespace"), ("masked", "mask")):
        out[f"la-{key}-pct"] = f"{acc[kind]:.1f}%"
        out[f"la-{key}"] = estimate_text(estimates[f"la-{key}"])
    out["la-before"] = estimate_text(estimates["la-before"])
    out["la-times-papers"] = times_papers(estimates)
    out.update(filler_losses(estimates))
    if varsum is not None:
        levels, reads = varsum["levels"], varsum["reads"]
        short_v, long_v = levels.loc[0], levels.loc[levels.index.max()]
        d = varsum["drop"].iloc[0]
        out.update(
            {
                "la-varsum-cap": varsum["cap"],
                "la-varsum-longest": int(short_v["longest"]),
                "la-varsum-longest-correct": int(levels["longest_correct"].max()),
                "la-varsum-right": int(short_v["right"]),
                "la-varsum-n": int(short_v["problems"]),
                "la-varsum-pct": f"{100 * short_v['accuracy']:.1f}%",
                "la-varsum-long-right": int(long_v["right"]),
                "la-varsum-long-n": int(long_v["problems"]),
                "la-varsum-long-at-cap": int(long_v["at_cap"]),
                "la-varsum-drop": f"{points_ci(d['change'], d['ci_low'], d['ci_high'])} points, "
                f"n = {d['n']}, {p_text(d['p_sign_flip'])}",
                "la-varsum-stated": int(reads.loc[0, "stated"]),
                "la-varsum-stated-right": int(reads.loc[0, "right"]),
                "la-varsum-stated-share": f"{reads.loc[0, 'right'] / reads.loc[0, 'stated']:.0%}",
            }
        )
    if ruler is not None:
        out.update(_ruler_quotes(estimates, ruler, params))
    return out


def _ruler_quotes(estimates: dict[str, Estimate], ruler: dict, params: dict) -> dict:
    """The RULER section's numbers: each task's change, what its recitations hold, and the
    design's length in the reader's tokens."""
    rec = ruler["recited"]
    steps = ruler["steps"].set_index(["subtask", "mode"])
    out = {}
    for t in rec.index:
        out[f"la-ruler-{t}"] = estimate_text(estimates[f"la-ruler-{t}"])
        out[f"la-{t}-supporting"] = f"{100 * rec.loc[t, 'supporting']:.0f}%"
        out[f"la-{t}-copied"] = f"{100 * rec.loc[t, 'copies_supporting']:.0f}%"
        out[f"la-{t}-identified"] = f"{100 * rec.loc[t, 'identifies']:.0f}%"
        out[f"la-{t}-answer-in"] = f"{100 * rec.loc[t, 'answer']:.0f}%"
        out[f"la-{t}-tokens"] = f"{rec.loc[t, 'tokens']:g}"
        out[f"la-{t}-named"] = f"{steps.loc[(t, 'answer_from_named'), 'second_step']:.0f}%"
        out[f"la-{t}-questions"] = int(rec.loc[t, "questions"])
    out["la-recitations"] = int(rec["questions"].sum())
    out["la-recitations-at-cap"] = int(rec["at_cap"].sum())
    out["la-recite-cap"] = f"{rq.RECITE_TOKENS:,}"
    out["la-ruler-length"] = " and ".join(f"{k:,}" for k in params["ruler"]["lengths"])
    return out


def statements(view: LengthResult) -> dict[str, bool]:
    """What the chapter's prose says in words, each as a check on the committed run."""
    est, verdicts = view.estimates, view.verdicts
    acc = view.gsm.groupby("condition")["correct"].mean()
    said = {
        "filler between evidence and question lowers accuracy (interval and test, each kind)": all(
            est[c].ci_high < 0 and est[c].p < 0.05 for c in ("la-essay", "la-whitespace", "la-mask")
        ),
        "each of the three is judged only with its recitation premise": all(
            (verdicts.get(c) == "premise not measured")
            == (est[c].facts["recited"] != est[c].facts["recited"])
            for c in ("la-essay", "la-whitespace", "la-mask")
        ),
        "and more than the paper's 3-29 points": all(
            -est[c].difference > 29 for c in ("la-essay", "la-whitespace", "la-mask")
        ),
        "masking hurts most": acc["masked"] < acc["whitespace"] < acc["essay"],
        "next to its evidence length costs nothing (not reproduced)": verdicts.get("la-before")
        == "not reproduced"
        and est["la-before"].ci_low >= 0,
        "token-level whitespace answers none": acc["single-space tokens"]
        == acc["newline tokens"]
        == 0,
    }
    if view.varsum is not None:
        said["VarSum is at the floor and its budget decides nothing"] = (
            view.varsum["levels"].loc[0, "at_cap"] == 0
            and view.varsum["levels"].loc[0, "accuracy"] < 0.1
        )
    if view.ruler is not None:
        rec = view.ruler["recited"]
        said.update(
            {
                "recite-then-answer loses on QA1 and QA2, where the premise (retrieval) fails": est[
                    "la-ruler-qa1"
                ].ci_high
                < 0
                and est["la-ruler-qa2"].ci_high < 0
                and verdicts.get("la-ruler-qa1")
                == verdicts.get("la-ruler-qa2")
                == "premise not met",
                "few recitations name or copy a document with the answer": (
                    rec[["supporting", "copies_supporting"]] < 0.25
                ).all(axis=None)
                and (rec["answer"] < 0.3).all(),
                "both RULER intervals are within ±10 points": all(
                    max(r.ci_high - r.change, r.change - r.ci_low) <= 10.05
                    for r in view.ruler["steps"].itertuples()
                    if r.mode == "retrieve_then_answer"
                ),
            }
        )
    return said


@dataclass(kw_only=True)
class LengthResult(ChapterResult):
    """The chapter's numbers: ``rows`` (this reader's padding rows), ``solve`` (scored
    solve-mode rows) and ``gsm`` (GSM8K's), ``placement`` (filler before or between),
    ``varsum`` and ``ruler`` (None when not run), the paper's short-problem accuracy beside
    ours (``between_note``) and the figures' Data lines."""

    rows: list[dict]
    solve: pd.DataFrame
    gsm: pd.DataFrame
    placement: pd.DataFrame
    varsum: dict | None
    ruler: dict | None
    premise: pd.DataFrame  # the paper's premise: recitation at the longest filler, per kind
    between_note: str
    provenance: str
    ruler_provenance: str
