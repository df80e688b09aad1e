"""Context-length-alone chapter (Du et al.): filler between or before the evidence,
recitation, retrieve-then-solve.

The grid is a list of *arms*, each a set of subtasks solved (or recited) with some filler
kinds at some lengths and one placement, so a chapter can run the expensive long fillers
only where they answer a question (e.g. before-vs-between for GSM8K alone). Arms marked
``headline`` run first; within an arm, shorter lengths run first, so a deadline leaves
whole curves. Length 0 is the short problem, shared by every arm that names it. An arm may
take only the first ``num_problems`` of the seeded problems (the list is prefix-stable, so
its rows are the same rows a larger run makes): long fillers on CPU need a smaller n.

Optional ``ruler`` (Table 5): ``{"subtasks": ["qa1", "qa2"], "lengths": [...],
"num_questions": n}`` adds RULER QA1/QA2 blocks, the baseline answer and the recitation
prompt per question and length, then two second steps: the answer from the recited
documents (the paper's), and from the documents the recitation names (ours). RULER sizes
contexts in the reader's tokens, so the plan then asks its run for the reader's tokenizer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pandas as pd

from ..claims import (
    Estimate,
    by_unit,
    chapter_verdicts,
    estimable,
    paired_estimate,
    paper_frame,
    read_claims,
    sizing_table,
)
from ..errors import ParameterError
from ..metrics import summarize, wilson_interval
from ..models import tokenizer_digest
from ..plots import FigureText, book_figure, condition_bars
from ..report import (
    and_list,
    estimate_text,
    n_for_half_width,
    p_text,
    params_text,
    pct,
    pct_ci,
    percent_words,
    points_ci,
)
from ..results import point_links, provenance, rows_table
from ..runner import Block, LazyRequests
from ..tasks import length_alone as la
from ..tasks import ruler_qa as rq
from .contract import Chapter, ChapterResult, Run

EXPERIMENT = la.TASK
ARM_FIELDS = {"subtasks", "mode", "placement", "kinds", "lengths", "headline", "num_problems"}
RULER_FIELDS = {"subtasks", "lengths", "num_questions"}
PREMISE_SCALE = "recitation-full"  # the recitations the la-* premises read


def problems_for(params: dict) -> dict[str, list[la.Problem]]:
    """Every subtask any arm names, ``num_problems`` seeded problems each (prefix-stable)."""
    names = list(dict.fromkeys(s for arm in params["arms"] for s in arm["subtasks"]))
    return {s: la.load_problems(s, params["num_problems"], seed=params["seed"]) for s in names}


def blocks(params: dict, count_tokens=None, shared_as: str | None = None) -> list[Block]:
    """The chapter's blocks: each arm at each length (headline arms first), then RULER's,
    sized with ``count_tokens`` (:func:`ruler_blocks`)."""
    problems = problems_for(params)
    every = [p for ps in problems.values() for p in ps]
    seen: set[str] = set()
    headline, rest = [], []
    for k, arm in enumerate(params["arms"]):
        unknown = set(arm) - ARM_FIELDS
        if unknown or not {"subtasks", "kinds", "lengths"} <= set(arm):
            raise ParameterError(
                f"arm {k}: needs subtasks, kinds, lengths (optional mode, placement, headline, "
                f"num_problems); unknown fields {sorted(unknown)}"
            )
        limit = arm.get("num_problems", params["num_problems"])
        if not isinstance(limit, int) or not 1 <= limit <= params["num_problems"]:
            raise ParameterError(
                f"arm {k}: num_problems must be an integer in 1..{params['num_problems']}, got {limit!r}"
            )
        mode, placement = arm.get("mode", "solve"), arm.get("placement", "between")
        for length in sorted(arm["lengths"]):
            reqs = []
            for subtask in arm["subtasks"]:
                for r in la.make_requests(
                    problems[subtask][:limit],
                    filler_kinds=arm["kinds"],
                    lengths=[length],
                    placements=(placement,),
                    mode=mode,
                ):
                    key = r.example_id + json.dumps(r.condition, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        reqs.append(r)
            if not reqs:
                continue
            followup = None
            if mode == "recite" and params.get("retrieve_then_solve", True):

                def followup(rows, every=every):
                    return la.retrieve_then_solve_requests(
                        every, [r for r in rows if r["condition"]["mode"] == "recite"]
                    )

            name = (
                f"{mode} {'/'.join(arm['subtasks'])} {'/'.join(arm['kinds'])} {placement} {length}"
            )
            (headline if arm.get("headline") else rest).append(
                Block(name, EXPERIMENT, reqs, bool(arm.get("headline")), followup)
            )
    return headline + rest + ruler_blocks(params, count_tokens, shared_as)


def ruler_questions(params: dict) -> dict:
    """{subtask: (RULER set, the seeded questions asked)} for the ``ruler`` parameters."""
    cfg = params["ruler"]
    return {
        s: (ruler, rq.sample(ruler, cfg["num_questions"], seed=params["seed"]))
        for s in cfg["subtasks"]
        for ruler in [rq.load(s)]
    }


_SIZED: dict[tuple, dict[int, list]] = {}  # RULER requests by length, per tokenizer pipeline


def ruler_blocks(params: dict, count_tokens=None, shared_as: str | None = None) -> list[Block]:
    """RULER QA blocks, shorter lengths first, contexts sized with ``count_tokens``; each
    block's followup answers from the recitations once they are stored (retrieve-then-answer,
    the paper's Figure 12). Readers whose counters share a pipeline (``shared_as``, the
    tokenizer's digest) share the sized contexts; a caller's own counter sizes its own."""
    cfg = params.get("ruler")
    if not cfg:
        return []
    if not isinstance(cfg, dict) or set(cfg) != RULER_FIELDS:
        raise ParameterError(
            f"ruler must be a mapping with exactly {sorted(RULER_FIELDS)}, got {cfg!r}"
        )
    if count_tokens is None:
        raise ParameterError(
            "RULER contexts are sized in the reader's tokens: plan them through the chapter's "
            "run (LengthAlone.plan), which counts with the reader's tokenizer"
        )

    blocks = []
    lengths = sorted(cfg["lengths"])
    for subtask, (ruler, questions) in ruler_questions(params).items():
        # Sizing contexts tokenizes them: minutes for 500 questions at 32K tokens. Every
        # length of a subtask is sized in one pass (each question's draws made once), and
        # only when a run or a count first reaches one of its blocks.
        # Readers whose tokenizers are the same pipeline (Qwen2.5's 0.5B and 1.5B) get the same
        # contexts: sized once per process for all of them.
        key = (subtask, tuple(q.id for q in questions), tuple(lengths), params["seed"], shared_as)
        built: dict[int, list] = _SIZED.setdefault(key, {}) if shared_as else {}

        def requests_at(length, ruler=ruler, questions=questions, built=built):
            if not built:
                for r in rq.make_requests(
                    ruler,
                    questions,
                    lengths=lengths,
                    count_tokens=count_tokens,
                    seed=params["seed"],
                ):
                    built.setdefault(r.condition["length"], []).append(r)
            return built.get(length, [])

        def followup(rows, questions=questions, ruler=ruler):
            recited = [r for r in rows if r["condition"]["mode"] == "recite"]
            return rq.answer_from_recitation_requests(
                questions, recited
            ) + rq.answer_from_named_documents_requests(ruler, questions, recited)

        for length in lengths:
            blocks.append(
                Block(
                    f"RULER {subtask} {length}",
                    rq.TASK,
                    LazyRequests(lambda length=length, at=requests_at: at(length)),
                    False,
                    followup,
                )
            )
    return blocks


def longest_filler(params: dict) -> int:
    """The longest filler any GSM8K arm asks: the length the claims compare with none."""
    return max(n for arm in params["arms"] if "gsm8k" in arm["subtasks"] for n in arm["lengths"])


def _gsm8k_correct(row: dict) -> float:
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


# ---------------------------------------------------------------------------------------------
# Analysis: what the notebook shows, as numbers

LABELS = {
    ("none", "none"): "no filler",
    ("essay", "between"): "essay",
    ("whitespace", "between"): "whitespace",
    ("mask", "between"): "masked",
    ("whitespace", "before"): "whitespace, before the evidence",
    ("space_tokens", "between"): "single-space tokens",
    ("newline_tokens", "between"): "newline tokens",
}
BAR_ORDER = (
    "no filler",
    "essay",
    "whitespace",
    "single-space tokens",
    "newline tokens",
    "masked",
    "whitespace, before the evidence",
)
VARIANTS = {
    "gsm8k": "GSM8K (paper's design)",
    "gsm8k_no_final_step": "GSM8K without the final step",
}
PAPER_TABLE = {"essay": 6, "whitespace": 7, "mask": 3}  # between evidence and question
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


def bars(solve: pd.DataFrame) -> pd.DataFrame:
    """GSM8K accuracy per variant and filler condition (the figure's bars)."""
    return summarize(solve[solve["subtask"].str.startswith("gsm8k")], ["variant", "condition"])


def between(gsm: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Each filler kind between evidence and question minus no filler, beside the paper's drops."""
    drops = la.drops_from_short(gsm)
    theirs = {
        (t, m): v
        for t, m, v in paper[
            (paper["subtask"] == "gsm8k")
            & (paper["length"] == 15000)
            & (paper["metric"] == "accuracy")
        ][["table", "model", "value"]].itertuples(index=False)
    }

    def paper_cell(kind, who):
        value = theirs.get((PAPER_TABLE.get(kind), who))
        return "—" if value is None else f"{value:+.1f}"

    rows = drops[drops["placement"] == "between"]
    return pd.DataFrame(
        [
            {
                "filler": LABELS[(r.filler, "between")],
                "tokens": f"{r.filler_tokens:,}",
                "problems": r.n,
                "ours: change (pts, 95% CI)": points_ci(r.change, r.ci_low, r.ci_high),
                "sign-flip p": p_text(r.p_sign_flip).removeprefix("p = "),
                **{
                    f"paper, {label} (15K)": paper_cell(r.filler, who)
                    for who, label in PAPER_READERS.items()
                },
            }
            for r in rows.itertuples()
        ]
    )


def sizing(estimates: dict) -> pd.DataFrame:
    """Problems a 95% half-width of 10 points needs for each filler condition minus no
    filler, from the claims' own estimates."""
    return sizing_table(
        {
            f"{condition} minus no filler": estimates.get(claim)
            for condition, claim in (
                ("essay", "la-essay"),
                ("whitespace", "la-whitespace"),
                ("masked", "la-mask"),
                ("whitespace, before the evidence", "la-before"),
            )
        },
        "problems",
    )


def placement(gsm: pd.DataFrame, paper: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Whitespace before the evidence minus no filler, and before minus between, beside Table 8."""
    drops = la.drops_from_short(gsm)
    before = drops[drops["placement"] == "before"].iloc[0]
    placed = la.paired_differences(
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


def whitespace_units(gsm: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The three constructions of whitespace: accuracy, output length and outputs at the token
    cap; and one output of each token-level kind."""
    unit = gsm[
        gsm["filler"].isin(["whitespace", "space_tokens", "newline_tokens"])
        & (gsm["placement"] == "between")
    ]
    cap = la.budget("gsm8k", "solve")
    table = (
        unit.groupby("condition")
        .agg(
            problems=("correct", "size"),
            accuracy=("correct", "mean"),
            mean_new_tokens=("new_tokens", "mean"),
            at_token_cap=("new_tokens", lambda s: (s >= cap).mean()),
        )
        .assign(
            accuracy=lambda d: (100 * d["accuracy"]).round(1),
            mean_new_tokens=lambda d: d["mean_new_tokens"].round(0),
            at_token_cap=lambda d: (100 * d["at_token_cap"]).round(0),
        )
        .rename(
            columns={"accuracy": "accuracy (%)", "at_token_cap": "outputs at the token cap (%)"}
        )
        .reset_index()
    )
    return table, unit[unit["filler"] != "whitespace"].drop_duplicates("condition")[
        ["condition", "output"]
    ]


def no_final_step(solve: pd.DataFrame) -> pd.DataFrame:
    """GSM8K without the last step of its worked solution, per filler condition."""
    cut = solve[solve["subtask"] == "gsm8k_no_final_step"]
    table = summarize(cut, ["condition"])
    table["accuracy"] = [
        pct_ci(a, lo, hi) for a, lo, hi in zip(table["accuracy"], table["ci_low"], table["ci_high"])
    ]
    return table[["condition", "n", "accuracy"]].rename(
        columns={"accuracy": "accuracy (%, 95% Wilson)", "n": "problems"}
    )


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
    drop = la.drops_from_short(varsum)
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
            la.paired_differences(
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


def recitation_table(recited: pd.DataFrame) -> pd.DataFrame:
    percent = ["names", "supporting", "copies", "copies_supporting", "identifies", "answer"]
    return (
        recited.drop(columns="at_cap")
        .assign(**{c: (100 * recited[c]).round(1) for c in percent})
        .rename(
            index=RULER_TASKS,
            columns={
                "names": "name a document (%)",
                "supporting": "name one holding the answer (%)",
                "copies": "copy a line verbatim (%)",
                "copies_supporting": "copy a line of one holding the answer (%)",
                "identifies": "identify one holding the answer: the premise (%)",
                "answer": "contain a gold answer (%)",
                "tokens": "median length (tokens)",
            },
        )
        .reset_index()
        .rename(columns={"subtask": "task"})
    )


FILLER_CLAIMS = ("la-essay", "la-whitespace", "la-mask")


def times_papers(estimates: dict[str, Estimate]) -> str:
    """How many times each of the paper's models' drops ours is, over the three filler kinds
    between evidence and question: "4.4 to 18.2 times Llama-3-8B's and 1.4 to 8.5 times
    Mistral-7B's" (each claim's effect and other effects in ``data/paper/claims.csv``)."""
    by_id = {c.id: c for c in read_claims()}
    per_model: dict[str, list[float]] = {}
    for claim_id in FILLER_CLAIMS:
        claim, est = by_id[claim_id], estimates[claim_id]
        effects = [(PAPER_READERS["Llama3-8B"], claim.paper_effect), *claim.other_effects]
        for model, effect in effects:
            if effect:
                per_model.setdefault(model, []).append(est.difference / effect)
    return " and ".join(
        f"{min(r):.1f} to {max(r):.1f} times {model}'s" for model, r in per_model.items()
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
    out["la-between-loss-whitespace"] = f"{-estimates['la-whitespace'].difference:.0f}"
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
        rec = ruler["recited"]
        steps = ruler["steps"].set_index(["subtask", "mode"])
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
    return out


def varsum_tables(varsum: dict) -> list[tuple[pd.DataFrame, str]]:
    """VarSum's levels (accuracy, outputs at the cap, longest outputs), its drop with filler,
    and the values of asked variables the outputs state."""
    levels = (
        varsum["levels"]
        .assign(accuracy=(100 * varsum["levels"]["accuracy"]).round(1))
        .drop(columns="right")
        .rename(
            columns={
                "accuracy": "accuracy (%)",
                "at_cap": f"outputs at the {varsum['cap']}-token cap",
                "longest": "longest output (tokens)",
                "longest_correct": "longest correct output (tokens)",
            }
        )
        .reset_index()
        .rename(columns={"filler_tokens": "essay tokens"})
    )
    reads = varsum["reads"]
    reads = (
        reads.assign(share=(100 * reads["right"] / reads["stated"]).round(1))
        .reset_index()
        .rename(
            columns={
                "filler_tokens": "essay tokens",
                "stated": "values of asked variables stated",
                "right": "of which match the evidence",
                "share": "share right (%)",
            }
        )
    )
    return [
        (levels, "VarSum accuracy and output lengths at each filler length."),
        (varsum["drops"], "VarSum: the change with essay filler, paired by problem."),
        (reads, "The values of the asked variables the outputs state, and how many are right."),
    ]


def sample_outputs(solve: pd.DataFrame, params: dict, n: int = 3) -> str:
    """A few outputs of GSM8K without the final step, with no filler, beside their answers."""
    answers = {p.id: p.answer for ps in problems_for(params).values() for p in ps}
    sample = solve[
        (solve["subtask"] == "gsm8k_no_final_step") & (solve["filler_tokens"] == 0)
    ].head(n)
    return "Outputs with no filler: " + "; ".join(
        f"`{o}` (answer {answers[e]})" for o, e in zip(sample["output"], sample["example_id"])
    )


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


def answered(run: Run) -> list[dict]:
    """Every row of the chapter's plan for this run's reader (missing ones generated)."""
    return run.answered()


# Where each filler condition of the figure sits in the paper: its table, at 15K tokens.
PAPER_CONDITIONS = {
    ("essay", "between"): 6,
    ("whitespace", "between"): 7,
    ("mask", "between"): 3,
    ("whitespace", "before"): 8,
}


def paper_bars(paper: pd.DataFrame, reader: str) -> dict:
    """The paper's GSM8K accuracy at 15K filler tokens for ``reader`` (a model of
    :data:`PAPER_READERS`) in each filler condition it reports (its no-filler accuracy plus the
    drop: Tables 6, 7 and 3 between evidence and question, Table 8 before the evidence), keyed
    as the figure's bars: ``(variant, condition)`` -> %."""
    gsm = paper[
        (paper["subtask"] == "gsm8k") & (paper["metric"] == "accuracy") & (paper["model"] == reader)
    ]
    marks = {}
    for condition, table in PAPER_CONDITIONS.items():
        cells = gsm[(gsm["table"] == table) & (gsm["filler"] == condition[0])]
        cells = cells.set_index("length")["value"]
        if {0, 15000} <= set(cells.index):
            marks[VARIANTS["gsm8k"], LABELS[condition]] = cells[0] + cells[15000]
    return marks


@book_figure
def figure(view: LengthResult, paper: pd.DataFrame):
    """GSM8K accuracy per filler condition, the paper's design and without the final step,
    with each of the paper's readers at 15K filler tokens."""
    return condition_bars(
        bars(view.solve),
        order=BAR_ORDER,
        hue="variant",
        xlabel="GSM8K accuracy (%)",
        papers={
            f"paper: {label}, 15K filler tokens": paper_bars(paper, who)
            for who, label in PAPER_READERS.items()
        },
        links=view.links,
    )


def _devices(table: pd.DataFrame) -> str:
    if "device" not in table:
        return "device not recorded"
    pairs = table[["device", "dtype"]].drop_duplicates().itertuples(index=False)
    return "; ".join(f"{d}, {t}" for d, t in pairs)


def figure_text(view: LengthResult) -> FigureText:
    """:func:`figure`'s caption and alt text, from the bars it draws."""
    shown = bars(view.solve)
    per_bar = shown["n"].unique()
    filler = int(view.gsm["filler_tokens"].max())
    caption = (
        f"GSM8K accuracy of {view.label} with no filler and with {filler:,} filler tokens of "
        f"each kind and placement ({', '.join(str(n) for n in sorted(per_bar))} problems per "
        f"bar, the same problems in every bar; {_devices(view.solve)}). Whiskers: 95% Wilson "
        "intervals. Open markers: the paper's "
        + " and ".join(PAPER_READERS.values())
        + " with 15K filler tokens (each one's no-filler accuracy plus its drop: Tables 6, 7 "
        'and 3 between evidence and question, Table 8 before the evidence). "Not run": '
        "the arm was not generated for that variant."
    )
    parts = []
    for variant, group in shown.groupby("variant", sort=False):
        cells = group.set_index("condition")["accuracy"]
        parts.append(
            f"{variant}: "
            + "; ".join(f"{c}: {percent_words(cells[c])}" for c in BAR_ORDER if c in cells.index)
            + "."
        )
    return FigureText(caption, "Bar chart of GSM8K accuracy. " + " ".join(parts))


def ruler_figure_text(view: LengthResult) -> FigureText:
    """:func:`ruler_figure`'s caption and alt text, from the bars it draws."""
    shown = summarize(view.ruler["answers"], ["task", "condition"])
    scored = view.ruler["scored"]
    caption = (
        f"RULER QA1 and QA2 at {int(scored['length'].max()):,} tokens, {view.label}: RULER's "
        "string_match_part with its prompt over the whole context, with the paper's "
        "recite-then-answer, and with the documents "
        f"the recitation names pasted verbatim ({int(shown['n'].min())} questions per bar, the "
        "same questions in every bar of a task). Whiskers: 95% Wilson intervals."
    )
    alt = "Bar chart. " + " ".join(
        f"{task}: "
        + "; ".join(
            f"{m}: {percent_words(cells[m])}" for m in RULER_MODES.values() if m in cells.index
        )
        + "."
        for task, group in shown.groupby("task", sort=False)
        for cells in [group.set_index("condition")["accuracy"]]
    )
    return FigureText(caption, alt)


@book_figure
def ruler_figure(view: LengthResult):
    """RULER QA1 and QA2 under each arm."""
    return condition_bars(
        summarize(view.ruler["answers"], ["task", "condition"]),
        order=list(RULER_MODES.values()),
        hue="task",
        xlabel="RULER string_match_part (%)",
    )


class LengthAlone(Chapter):
    """Context-length-alone chapter (Du et al.): filler between or before the evidence,"""

    name = "length_alone"
    order = 2  # where longctx reproduce runs its headline blocks among the chapters
    notebook = "notebooks/length_alone.py"
    claim_blocks = {
        "la-essay": ("between 0", "between 16000"),
        "la-whitespace": ("between 0", "between 16000"),
        "la-mask": ("between 0", "between 16000"),
        "la-before": ("between 0", "before 16000"),
        "la-ruler-qa1": ("RULER qa1",),
        "la-ruler-qa2": ("RULER qa2",),
    }
    experiments = (EXPERIMENT, rq.TASK)  # the stores whose rows the chapter offers (RULER too)
    premise_scale = PREMISE_SCALE  # the recitations the la-* premises read

    def plan(self, run: Run) -> list[Block]:
        if not run.params.get("ruler"):
            return blocks(run.params)  # no context sized in the reader's tokens
        tokenizer = run.tokenizer()

        def count_tokens(text: str) -> int:
            return len(tokenizer(text, add_special_tokens=False).input_ids)

        return blocks(run.params, count_tokens, tokenizer_digest(run.reader.model))

    def claims(self, run: Run) -> dict[str, Estimate]:
        """The paper's claims on GSM8K, paired by problem: each filler kind between the evidence
        and the question (and whitespace before the evidence) at the longest filler asked, minus
        no filler; with ``ruler``, RULER QA1 and QA2 at the shortest length, the paper's two steps
        (recite, then answer from the recitation) minus RULER's prompt over the whole context."""
        params = run.params
        gsm8k = {p.id: p for p in problems_for(params).get("gsm8k", [])}
        keep = set(gsm8k)
        rows = [r for r in run.rows(EXPERIMENT) if r["example_id"] in keep]
        recited_rows = premise_rows(run)
        longest = longest_filler(params)
        short = by_unit(
            rows, {"subtask": "gsm8k", "mode": "solve", "filler_tokens": 0}, _gsm8k_correct
        )
        thresholds = recited_thresholds()

        def drop(filler, placement="between"):
            long = {
                "subtask": "gsm8k",
                "mode": "solve",
                "filler": filler,
                "placement": placement,
                "filler_tokens": longest,
            }
            label = f"{longest / 1000:g}K" if longest >= 1000 else str(longest)
            est = paired_estimate(
                short,
                by_unit(rows, long, _gsm8k_correct),
                side_names=("no filler", f"{LABELS[filler, placement]} ({label} tokens)"),
            )
            if placement != "between":
                return est
            threshold = thresholds[f"la-{filler}"]
            facts = recited_facts(recited_rows, gsm8k, filler, longest, threshold)
            return replace(est, facts={**facts, **kept_facts(recited_rows, gsm8k, filler, longest)})

        out = {
            "la-essay": lambda: drop("essay"),
            "la-whitespace": lambda: drop("whitespace"),
            "la-mask": lambda: drop("mask"),
            "la-before": lambda: drop("whitespace", "before"),
        }
        if params.get("ruler"):
            length = min(params["ruler"]["lengths"])
            ruler_rows = run.rows(rq.TASK)
            for subtask, (ruler, questions) in ruler_questions(params).items():
                by_id = {q.id: q for q in questions}
                mine = [r for r in ruler_rows if r["example_id"] in by_id]
                where = {"subtask": subtask, "length": length}

                def recite_first(ruler=ruler, by_id=by_id, mine=mine, where=where):
                    est = paired_estimate(
                        by_unit(mine, {**where, "mode": "answer"}, rq.score),
                        by_unit(mine, {**where, "mode": "retrieve_then_answer"}, rq.score),
                        side_names=("whole context", "recite, then answer"),
                    )
                    # The paper's premise: retrieval works before the answer is written. A
                    # recitation retrieves when it points at a document holding the answer,
                    # by copying its text or by naming it (the second step reads either).
                    identified = by_unit(
                        mine,
                        {**where, "mode": "recite"},
                        lambda row: rq.identifies_supporting(
                            rq.recitation_diagnostics(ruler, by_id[row["example_id"]], row)
                        ),
                    )
                    if not identified:
                        return est
                    share = 100 * sum(identified.values()) / len(identified)
                    return replace(est, facts={"identified": share})

                out[f"la-ruler-{subtask}"] = recite_first
        return estimable(out)

    def analyze(self, run: Run) -> LengthResult:
        """Everything the chapter shows from its rows: GSM8K with every filler, placement and
        whitespace unit, VarSum, RULER's recite-then-answer, the claims' estimates and verdicts,
        the numbers the prose quotes and its statements."""
        params, reader, results_dir = run.params, run.reader, run.results
        stored, paper = answered(run), paper_frame("length_alone")
        rows = [r for r in stored if r["task"] == la.TASK]
        ruler_rows = [r for r in stored if r["task"] == rq.TASK]
        solve = solved(rows, params)
        gsm = solve[solve["subtask"] == "gsm8k"]
        estimates = self.claims(run)
        gsm8k = {p.id: p for p in problems_for(params).get("gsm8k", [])}
        levels = premise_levels(premise_rows(run), gsm8k, longest_filler(params))
        placed_table, before, placed = placement(gsm, paper)
        varsum, ruler = varsum_views(solve, rows, paper), ruler_views(ruler_rows, params, paper)
        verdicts = chapter_verdicts("length_alone", estimates)
        view = LengthResult(
            label=reader.label,
            estimates=estimates,
            verdicts=verdicts,
            rows=rows,
            solve=solve,
            links=point_links(
                solve[solve["subtask"].str.startswith("gsm8k")],
                ("variant", "condition"),
                results_dir,
                EXPERIMENT,
            ),
            gsm=gsm,
            placement=placed_table,
            varsum=varsum,
            ruler=ruler,
            premise=premise_table(levels, paper, estimates),
            quoted={
                **quoted(
                    estimates, gsm, solve, before, placed, varsum, ruler, rows, ruler_rows, params
                ),
                "la-premise-state": premise_words(levels, estimates),
                "la-premise-outcome": premise_outcome(verdicts),
            },
            between_note=(
                "The paper's short-problem accuracy on GSM8K is 86-88% (Llama-3-8B) and 71% "
                f"(Mistral-7B); ours is {100 * gsm[gsm['filler_tokens'] == 0]['correct'].mean():.1f}%."
            ),
            provenance=(
                f"**Data.** {provenance(rows_table(rows, lambda r: 0), results_dir, EXPERIMENT)} "
                "Greedy decoding; the figure's arms are the `gsm8k` entries of `arms` in the "
                "parameters cell."
            ),
            ruler_provenance=(
                (
                    f"**Data.** {provenance(rows_table(ruler_rows, lambda r: 0), results_dir, rq.TASK)} "
                    f"Greedy decoding; RULER parameters: {params_text(params.get('ruler') or {})}."
                )
                if ruler_rows
                else ""
            ),
            consistent=(
                len(solve) == sum(r["condition"]["mode"] == "solve" for r in rows)
                and len({r["key"] for r in stored}) == len(stored) == len(rows) + len(ruler_rows)
            ),
        )
        view.said = statements(view)
        return view
