"""C-NORM chapter (context format and contextual normalization).

Headline: C-NORM vs the unformatted baseline on 10-document NQ-Open QA (OAA, paired by
question). Its prompts depend on a measurement made along the way: the delimiter is the
one whose calibration prompts get the highest mean Attention Balance Score, so the plan
has two stages: an attention block over the calibration prompts, whose stored rows choose
the delimiter (and the "shortest tokenization" control), then the QA generations. The
key-value format grid and delimiter sweep, the Figure 4 attention vectors and the
selection's sensitivity to p follow.

LongBench-v2 is left out of the plan: its prompts are cut to a token budget with the
model's tokenizer and its data is not reachable offline; the notebook runs it when
``longbench_data`` names a file.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...claims import (
    Estimate,
    NoPairedUnits,
    by_unit,
    chapter_verdicts,
    estimable,
    paired_estimate,
    sizing_table,
)
from ...formats import delimiter_label
from ...metrics import pearson_interval, summarize
from ...models import load_tokenizer
from ...paths import repo_root, resolve
from ...plots import (
    ATTENTION_BINS,
    FigureText,
    accuracy_by_position,
    attention_profiles,
    book_figure,
    tokens_vs_accuracy,
)
from ...reader import Reader
from ...report import estimate_text, p_text, percent_words, points_ci
from ...requests import Request, unique_requests
from ...results import load_experiment, paired_comparison, point_links, provenance, rows_table
from ...runner import Block, answer
from ...tasks import kv_retrieval as kv
from ...tasks import longbench_v2 as lb
from ...tasks import multidoc_qa as qa
from ..contract import Chapter, ChapterResult, Run
from . import method as cn

SELECTION = "cnorm_selection"
QA = "cnorm_qa"
KV = "cnorm_kv"
ATTENTION = "cnorm_attention"


def qa_examples(params: dict) -> tuple[list[qa.QAExample], list[qa.QAExample]]:
    """(evaluated questions, calibration questions), each with ``qa_documents - 1`` BM25
    distractors from the whole oracle pool; calibration starts at ``calibration_offset``."""
    oracle = qa.read_oracle()
    k = params["qa_documents"] - 1
    evaluated = qa.attach_distractors(oracle[: params["qa_questions"]], k, pool=oracle)
    start = params["calibration_offset"]
    calibration = qa.attach_distractors(
        oracle[start : start + params["calibration_questions"]], k, pool=oracle
    )
    return evaluated, calibration


def selection_items(
    params: dict, calibration, *, ratio: float, samples: int, candidates
) -> list[dict]:
    """Attention items (prompt, candidate, sample, ratio) for scoring ``candidates``."""
    prompts = cn.selection_prompts(
        calibration[:samples],
        candidates,
        num_documents=params["qa_documents"],
        ratio=ratio,
        seed=params["seed"],
    )
    return [
        {"prompt": p, "candidate": c, "sample": i, "ratio": ratio}
        for c, ps in prompts.items()
        for i, p in enumerate(ps)
    ]


def choices(selection_rows: list[dict]) -> tuple[str, str, dict[str, list[float]]]:
    """(ABS-selected delimiter, shortest-tokenization delimiter, ABS per candidate in sample
    order) from the stored selection rows of one ratio."""
    by: dict[str, list[dict]] = {}
    for r in selection_rows:
        by.setdefault(r["candidate"], []).append(r)
    scores = {c: [r["abs"] for r in sorted(rs, key=lambda r: r["sample"])] for c, rs in by.items()}
    tokens = {
        c: sum(r["tokens"] for r in rs) / len(rs) for c, rs in by.items() if c != cn.NO_FORMAT
    }
    # Ties go to the first name in sorted order, as pandas' idxmin over a groupby does.
    return cn.select_delimiter(scores), min(sorted(tokens), key=tokens.get), scores


def qa_requests(params: dict, evaluated, chosen: str, shortest: str) -> list[Request]:
    """Baseline and C-NORM for every seed; the shortest-tokenization control on the first
    seed when it differs from the ABS choice."""
    common = dict(
        num_documents=params["qa_documents"],
        positions=params["qa_positions"],
        ratio=params["cnorm_ratio"],
    )
    out = []
    for s in params["qa_seeds"]:
        out += cn.qa_requests(evaluated, seed=s, method="baseline", delimiter="none", **common)
        out += cn.qa_requests(evaluated, seed=s, method="C-NORM", delimiter=chosen, **common)
    if shortest != chosen:
        out += cn.qa_requests(
            evaluated,
            seed=params["qa_seeds"][0],
            method="shortest tokenization",
            delimiter=shortest,
            **common,
        )
    return out


def kv_requests(params: dict) -> tuple[list[Request], list[Request]]:
    """(the Figure 2 format x density grid, the Figure 3 delimiter sweep). The high-density
    cells have their own example count (``kv_high_examples``): plain minus UUID ids there is
    the paper's stated format effect, so it is sized; the examples are prefix-stable, so the
    first ``kv_examples`` are the low-density cells' examples too."""
    seed = params["seed"]
    grid = cn.kv_format_requests(
        delimiters=params["kv_formats"],
        density="low",
        num_pairs=params["kv_low_pairs"],
        positions=params["kv_low_positions"],
        examples=params["kv_examples"],
        seed=seed,
    ) + cn.kv_format_requests(
        delimiters=params["kv_formats"],
        density="high",
        num_pairs=params["kv_high_pairs"],
        positions=params["kv_high_positions"],
        examples=params["kv_high_examples"],
        seed=seed,
    )
    sweep = cn.kv_format_requests(
        delimiters=params["sweep_delimiters"],
        density="low",
        num_pairs=params["sweep_pairs"],
        positions=params["sweep_positions"],
        examples=params["sweep_examples"],
        seed=seed,
    )
    return grid, sweep


def attention_items(params: dict) -> list[dict]:
    """Figure 4: one key-value example, UUID vs plain ids, gold at each of ``attention_positions``."""
    example = kv.synthetic_examples(1, params["attention_pairs"], seed=params["seed"])[0]
    return [
        {
            "prompt": kv.build_prompt(example.with_format(d).with_gold_at(p - 1)),
            "format": delimiter_label(d),
            "gold_position": p,
        }
        for d in ["-", ""]
        for p in params["attention_positions"]
    ]


def blocks(params: dict) -> list[Block]:
    evaluated, calibration = qa_examples(params)

    def qa_stage(rows: list[dict]) -> Block:
        chosen, shortest, _ = choices(rows)
        return Block(
            f"C-NORM QA ({chosen!r}; shortest {shortest!r})",
            QA,
            qa_requests(params, evaluated, chosen, shortest),
            True,
        )

    grid, sweep = kv_requests(params)
    blocks = [
        Block(
            "C-NORM selection (attention)",
            SELECTION,
            [],
            True,
            qa_stage,
            followup_experiment=QA,
            attention=selection_items(
                params,
                calibration,
                ratio=params["cnorm_ratio"],
                samples=params["calibration_questions"],
                candidates=params["cnorm_candidates"],
            ),
        ),
        # At the paper's sizes the sweep's UUID and plain cells are the grid's low-density cells.
        Block("key-value formats and delimiter sweep", KV, unique_requests(grid + sweep)),
        Block(
            "final-token attention (Figure 4)",
            ATTENTION,
            [],
            attention=attention_items(params),
            keep_vector=True,
        ),
    ]
    for p in params["ratio_sweep"]:
        blocks.append(
            Block(
                f"selection at p = {p} (attention)",
                SELECTION,
                [],
                attention=selection_items(
                    params,
                    calibration,
                    ratio=p,
                    samples=params["ratio_sweep_samples"],
                    candidates=[c for c in params["cnorm_candidates"] if c != cn.NO_FORMAT],
                ),
            )
        )
    return blocks


def swept_rows(kv_rows: list[dict], params: dict) -> list[dict]:
    """The stored rows of the planned delimiter sweep (one gold position, low density)."""
    _, sweep = kv_requests(params)
    planned = {(r.example_id, r.condition["gold_index"], r.condition["delimiter"]) for r in sweep}
    return [
        r
        for r in kv_rows
        if r["condition"].get("density") == "low"
        and r["condition"].get("num_pairs") == params["sweep_pairs"]
        and (r["example_id"], r["condition"]["gold_index"], r["condition"]["delimiter"]) in planned
    ]


def _swept_delimiters(swept: list[dict]) -> tuple[list[str], dict, dict]:
    """The sweep's delimiters, shortest first by mean prompt tokens, with each one's mean
    prompt tokens and rows."""
    rows: dict = {}
    for r in swept:
        rows.setdefault(r["condition"]["delimiter"], []).append(r)
    tokens = {d: sum(r["prompt_tokens"] for r in rs) / len(rs) for d, rs in rows.items()}
    return sorted(tokens, key=tokens.get), tokens, rows


def token_correlation(swept: list[dict]) -> Estimate:
    """The paper's statistic for Figure 3: Pearson r over delimiters between a format's mean
    prompt tokens and its accuracy, with Fisher's interval and Pearson's p (n = delimiters)."""
    order, tokens, rows = _swept_delimiters(swept)
    if len(order) < 4:
        raise NoPairedUnits("the token correlation needs at least four swept delimiters")
    accuracy = [100 * sum(kv.score(r) for r in rows[d]) / len(rows[d]) for d in order]
    r, low, high, p = pearson_interval([tokens[d] for d in order], accuracy)
    detail = (
        f"{len(order)} delimiters from {tokens[order[0]]:,.0f} to {tokens[order[-1]]:,.0f} "
        f"prompt tokens, accuracy {min(accuracy):.1f}-{max(accuracy):.1f}%"
    )
    # the premise: a reader that finds no gold id under any format has nothing a format can cost
    facts = {"accuracy": sum(accuracy) / len(accuracy)}
    return Estimate(
        r,
        low,
        high,
        len(order),
        p,
        detail,
        facts=facts,
        units=tuple(order),
        control_units=tuple(tokens[d] for d in order),
        treatment_units=tuple(accuracy),
    )


def format_contrast(swept: list[dict]) -> Estimate:
    """Exploratory, defined with its data: per example, mean accuracy under the half of the
    delimiters with the most prompt tokens minus the half with the fewest."""
    order, _, _ = _swept_delimiters(swept)
    half = len(order) // 2
    if half < 1:
        raise NoPairedUnits("the delimiter sweep needs at least two delimiters with stored rows")

    def formats(delimiters):
        return by_unit(
            [r for r in swept if r["condition"]["delimiter"] in delimiters], {}, kv.score
        )

    return paired_estimate(
        formats(set(order[:half])),
        formats(set(order[-half:])),
        side_names=(f"{half} shortest formats", f"{half} longest formats"),
    )


# ---------------------------------------------------------------------------------------------
# Analysis: what the notebook shows, as numbers

FORMATS = ("UUID (-)", "plain text", "modified UUID (&)")


def selection(
    params: dict,
    results_dir: str | Path,
    reader: Reader,
    *,
    ratio: float | None = None,
    samples: int | None = None,
    candidates=None,
) -> pd.DataFrame:
    """The attention rows of the calibration prompts (stored; scored only when missing):
    one row per candidate and sample, with its ABS, tokens and seconds."""
    _, calibration = qa_examples(params)
    items = selection_items(
        params,
        calibration,
        ratio=params["cnorm_ratio"] if ratio is None else ratio,
        samples=samples or params["calibration_questions"],
        candidates=candidates or params["cnorm_candidates"],
    )
    return pd.DataFrame(_attention(items, SELECTION, reader, results_dir))


def _attention(
    items: list[dict], experiment: str, reader: Reader, results_dir, *, keep_vector: bool = False
) -> list[dict]:
    """The attention rows of ``items`` in ``experiment``'s store, through the runner (which
    scores any missing one with the backend's final-token attention)."""
    block = Block("attention", experiment, [], attention=items, keep_vector=keep_vector)
    return answer(block, reader, results_dir, progress=False)


def selection_summary(sel: pd.DataFrame) -> pd.DataFrame:
    return sel.groupby("candidate", sort=False).agg(
        mean_ABS=("abs", "mean"),
        sd_ABS=("abs", "std"),
        prompt_tokens=("tokens", "mean"),
        seconds=("seconds", "sum"),
    )


def abs_scores(sel: pd.DataFrame) -> dict[str, list[float]]:
    return {
        c: g.sort_values("sample")["abs"].tolist() for c, g in sel.groupby("candidate", sort=False)
    }


def qa_table(
    results_dir: str | Path, params: dict, reader: Reader, chosen: str, shortest: str
) -> pd.DataFrame:
    """The QA rows of this run: the evaluated questions, their size and orderings, the
    baseline and the two selected delimiters. Where ABS chooses the shortest tokenization
    itself, the control's prompts are C-NORM's on the first ordering (asked once, not
    twice): those rows stand for both."""
    evaluated = {e.example_id for e in qa.read_oracle()[: params["qa_questions"]]}
    table = rows_table(
        [r for r in reader.store(results_dir, QA).rows() if r["task"] == qa.TASK], qa.score
    )
    table = table[
        (table["num_documents"] == params["qa_documents"])
        & table["example_id"].isin(evaluated)
        & table["seed"].isin(params["qa_seeds"])
    ]
    table = table[(table["method"] == "baseline") | table["delimiter"].isin([chosen, shortest])]
    if shortest == chosen:
        first = table[(table["method"] == "C-NORM") & (table["seed"] == params["qa_seeds"][0])]
        table = pd.concat([table, first.assign(method="shortest tokenization")], ignore_index=True)
    return table


def qa_accuracy(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """Accuracy per method and gold position (the figure), pooled over the orderings."""
    summary = summarize(table, ["model", "method", "gold_index"])
    return summary.assign(
        position=summary["gold_index"] + 1,
        panel=f"{params['qa_documents']} documents, {len(params['qa_seeds'])} distractor orderings pooled",
    )


def qa_tests(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """C-NORM and the shortest tokenization against the baseline, per ordering and pooled:
    items paired by question, position and ordering, intervals resampling questions."""
    out = []
    for treatment in ["C-NORM", "shortest tokenization"]:
        sub = table[table["method"].isin(["baseline", treatment])]
        for label, g in [
            *[(f"seed {s}", sub[sub["seed"] == s]) for s in params["qa_seeds"]],
            ("all seeds", sub),
        ]:
            res = paired_comparison(
                g,
                condition="method",
                control="baseline",
                treatment=treatment,
                item=["example_id", "gold_index", "seed"],
            )
            if res["items"]:
                out.append(
                    {
                        "comparison": f"{treatment} - baseline",
                        "seeds": label,
                        "items": res["items"],
                        "questions": res["clusters"],
                        "difference": 100 * res["difference"],
                        "ci_low": 100 * res["ci_low"],
                        "ci_high": 100 * res["ci_high"],
                        "p": res["p_sign_flip"],
                    }
                )
    return pd.DataFrame(out)


def with_ci(table: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """Point estimate and interval columns as one readable ``difference (pts, 95% CI)`` column."""
    return table.assign(
        **{
            "difference (pts, 95% CI)": [
                points_ci(d, lo, hi, digits)
                for d, lo, hi in zip(table["difference"], table["ci_low"], table["ci_high"])
            ],
            "sign-flip p": table["p"].map(lambda p: p_text(p).removeprefix("p = ")),
        }
    ).drop(columns=["difference", "ci_low", "ci_high", "p"])


def qa_sizing(estimates: dict) -> pd.DataFrame:
    """Questions a 95% half-width of 10 points needs for C-NORM minus baseline (the claim's
    own estimate)."""
    return sizing_table({"C-NORM minus baseline": estimates.get("cnorm-qa")}, "questions")


def oaa_opa(table: pd.DataFrame, by) -> pd.DataFrame:
    """OAA and OPA with their intervals (numbers; :func:`oaa_opa_shown` writes them for readers)."""
    return cn.oaa_opa_table(table, list(by))


def oaa_opa_shown(table: pd.DataFrame) -> pd.DataFrame:
    out = table.assign(
        **{
            "OAA (95% CI)": [
                f"{a:.3f} [{lo:.2f}, {hi:.2f}]"
                for a, lo, hi in zip(table["OAA"], table["OAA_low"], table["OAA_high"])
            ],
            "OPA (95% CI)": [
                f"{a:.3f} [{lo:.2f}, {hi:.2f}]"
                for a, lo, hi in zip(table["OPA"], table["OPA_low"], table["OPA_high"])
            ],
        }
    )
    return out.drop(columns=["OAA", "OAA_low", "OAA_high", "OPA", "OPA_low", "OPA_high"]).round(3)


def kv_table(results_dir: str | Path, reader: Reader) -> pd.DataFrame:
    """The key-value rows (format grid and delimiter sweep) with ``format`` and 1-based ``position``."""
    table = rows_table(reader.store(results_dir, KV).rows(), kv.score)
    return table.assign(
        format=table["delimiter"].map(delimiter_label), position=table["gold_index"] + 1
    )


def figure2(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """The rows of the Figure 2 grid: both densities at their sizes, the grid's formats."""
    grid = table[
        ((table["density"] == "low") & (table["num_pairs"] == params["kv_low_pairs"]))
        | ((table["density"] == "high") & (table["num_pairs"] == params["kv_high_pairs"]))
    ]
    return grid[grid["delimiter"].isin(params["kv_formats"])]


def figure2_accuracy(grid: pd.DataFrame, params: dict, label: str) -> pd.DataFrame:
    summary = summarize(grid[grid["model"] == label], ["model", "density", "format", "position"])
    return summary.assign(
        panel=summary["density"].map(
            {
                "low": f"low density ({params['kv_low_pairs']} x 32 hex)",
                "high": f"high density ({params['kv_high_pairs']} x 128 hex)",
            }
        )
    )


def format_effects(grid: pd.DataFrame, control: str = "-") -> pd.DataFrame:
    """Each format minus UUIDs, paired by example and position, per reader and density."""
    out = []
    for (m, density), g in grid.groupby(["model", "density"]):
        for treatment in sorted(set(g["delimiter"]) - {control}):
            res = paired_comparison(
                g,
                condition="delimiter",
                control=control,
                treatment=treatment,
                item=["example_id", "gold_index"],
            )
            out.append(
                {
                    "model": m,
                    "density": density,
                    "comparison": f"{delimiter_label(treatment)} - UUID",
                    "items": res["items"],
                    "difference": 100 * res["difference"],
                    "ci_low": 100 * res["ci_low"],
                    "ci_high": 100 * res["ci_high"],
                    "p": res["p_sign_flip"],
                }
            )
    return pd.DataFrame(out)


def sweep(table: pd.DataFrame, params: dict, label: str) -> pd.DataFrame:
    """The delimiter sweep's rows: the planned examples and position at ``sweep_pairs``."""
    _, planned = kv_requests(params)
    rows = table[
        (table["density"] == "low")
        & (table["num_pairs"] == params["sweep_pairs"])
        & table["delimiter"].isin(params["sweep_delimiters"])
        & (table["model"] == label)
    ]
    return rows[
        rows["gold_index"].isin({r.condition["gold_index"] for r in planned})
        & rows["example_id"].isin({r.example_id for r in planned})
    ]


def by_delimiter(swept: pd.DataFrame) -> pd.DataFrame:
    """OAA (with its interval over examples) and mean prompt tokens per delimiter, fewest tokens first."""
    table = cn.oaa_opa_table(swept, ["delimiter"]).merge(
        swept.groupby("delimiter")["prompt_tokens"].mean().rename("prompt tokens").reset_index(),
        on="delimiter",
    )
    table.insert(1, "format", table["delimiter"].map(delimiter_label))
    return table.sort_values("prompt tokens").reset_index(drop=True)


def correlations(swept: pd.DataFrame, delimiters: pd.DataFrame, seed: int) -> dict:
    """Pearson r between a format's tokens and its OAA: over all formats with a bootstrap
    interval over examples and Fisher's interval over delimiters; and, post hoc, over the
    UUID-shaped formats only (plain text left out)."""
    every = cn.tokens_accuracy_correlation(swept, n_resamples=2000, seed=seed)
    x, y = delimiters["prompt tokens"].to_numpy(), delimiters["OAA"].to_numpy()
    fisher = (float("nan"), float("nan"))
    if len(x) >= 4 and np.ptp(x) > 0 and np.ptp(y) > 0:
        fisher = pearson_interval(x, y)[1:3]
    return {
        "all": every,
        "fisher": fisher,
        "uuid_shaped": cn.tokens_accuracy_correlation(
            swept[swept["delimiter"] != ""], n_resamples=2000, seed=seed
        ),
    }


def correlation_table(corr: dict, estimate: Estimate, delimiters: pd.DataFrame) -> pd.DataFrame:
    every, uuid = corr["all"], corr["uuid_shaped"]
    half = len(delimiters) // 2
    return pd.DataFrame(
        [
            {
                "measure": "Pearson r, tokens vs OAA",
                "ours": f"{every['r']:.2f}",
                "95% CI": f"[{every['ci_low']:.2f}, {every['ci_high']:.2f}] "
                f"(bootstrap over {every['examples']} examples)",
                "other interval": f"[{corr['fisher'][0]:.2f}, {corr['fisher'][1]:.2f}] "
                f"(Fisher, over {every['formats']} delimiters)",
                "paper (Qwen2.5-1.5B, 40 pairs)": "r = -0.82",
            },
            {
                "measure": "Pearson r, UUID-shaped formats only (post hoc, plain text left out)",
                "ours": f"{uuid['r']:.2f}",
                "95% CI": f"[{uuid['ci_low']:.2f}, {uuid['ci_high']:.2f}] (bootstrap over {uuid['examples']} examples)",
                "other interval": f"{uuid['formats']} delimiters",
                "paper (Qwen2.5-1.5B, 40 pairs)": "r = -0.82",
            },
            {
                "measure": f"exploratory: {half} longest minus {half} shortest formats (pts)",
                "ours": f"{estimate.difference:+.1f}",
                "95% CI": f"[{estimate.ci_low:+.1f}, {estimate.ci_high:+.1f}] ({estimate.n} examples)",
                "other interval": f"{p_text(estimate.p)}; {estimate.detail}",
                "paper (Qwen2.5-1.5B, 40 pairs)": "negative (longer formats score lower)",
            },
        ]
    )


def attention_view(params: dict, results_dir: str | Path, reader: Reader) -> list[dict]:
    """Figure 4's stored attention rows (vectors kept)."""
    return _attention(attention_items(params), ATTENTION, reader, results_dir, keep_vector=True)


def attention_shares(rows: list[dict]) -> pd.DataFrame:
    """Per Figure 4 prompt, the share of final-token attention on the first tenth of the
    prompt, the middle and the last tenth."""
    out = []
    for r in rows:
        a = np.asarray(r["attention"])
        tenth = a.size // 10
        out.append(
            {
                "format": r["format"],
                "gold_position": r["gold_position"],
                "abs": r["abs"],
                "head": a[:tenth].sum(),
                "middle": a[tenth:-tenth].sum(),
                "tail": a[-tenth:].sum(),
            }
        )
    return pd.DataFrame(out)


def stability(
    scores: dict[str, list[float]],
    chosen: str,
    params: dict,
    results_dir: str | Path,
    reader: Reader,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The choice from the first S prompts and how often it wins over random subsets of S;
    and the choice at the other ratios p (their attention rows stored by the plan)."""
    rng = random.Random(params["seed"])
    rows = []
    for s in range(1, params["calibration_questions"] + 1):
        wins = pd.Series([cn.select_delimiter(scores, samples=s, rng=rng) for _ in range(500)])
        share = wins.value_counts(normalize=True)
        rows.append(
            {
                "S": s,
                "first S prompts choose": cn.select_delimiter(scores, samples=s),
                f"subsets choosing {chosen!r} (%)": round(100 * float(share.get(chosen, 0.0))),
                "most frequent": share.idxmax(),
            }
        )
    n = params["ratio_sweep_samples"]
    ratios = [
        {
            "p": params["cnorm_ratio"],
            "S": n,
            "chosen": cn.select_delimiter(scores, samples=min(n, params["calibration_questions"])),
        }
    ]
    for p in params["ratio_sweep"]:
        sel = selection(
            params,
            results_dir,
            reader,
            ratio=p,
            samples=n,
            candidates=[c for c in params["cnorm_candidates"] if c != cn.NO_FORMAT],
        )
        at_p = abs_scores(sel)
        if cn.NO_FORMAT in scores:
            at_p[cn.NO_FORMAT] = scores[cn.NO_FORMAT][:n]
        ratios.append({"p": p, "S": n, "chosen": cn.select_delimiter(at_p)})
    return pd.DataFrame(rows), pd.DataFrame(ratios)


def quoted(
    estimates: dict[str, Estimate],
    sel: pd.DataFrame,
    chosen: str,
    shortest: str,
    qa: pd.DataFrame,
    tests: pd.DataFrame,
    seeds: pd.DataFrame,
    grid: pd.DataFrame,
    effects: pd.DataFrame,
    delimiters: pd.DataFrame,
    corr: dict,
    shares: pd.DataFrame,
    stable: pd.DataFrame,
    ratios: pd.DataFrame,
    params: dict,
    label: str,
) -> dict:
    """Every number the chapter's prose quotes, by glue key: the formats and the delimiter
    sweep, the attention profiles, and the selection with its QA comparison."""
    return {
        **_format_quotes(estimates, grid, effects, delimiters, corr, label),
        **_attention_quotes(shares),
        **_selection_quotes(
            estimates, sel, chosen, shortest, qa, tests, seeds, stable, ratios, params
        ),
    }


def _format_quotes(
    estimates: dict[str, Estimate],
    grid: pd.DataFrame,
    effects: pd.DataFrame,
    delimiters: pd.DataFrame,
    corr: dict,
    label: str,
) -> dict:
    fig2 = cn.oaa_opa_table(grid[grid["model"] == label], ["density", "format"]).set_index(
        ["density", "format"]
    )
    eff = effects[effects["model"] == label].set_index(["density", "comparison"])
    plain = eff.loc[("high", "plain text - UUID")]
    oaa = delimiters.set_index("delimiter")
    every, uuid = corr["all"], corr["uuid_shaped"]
    return {
        "cn-low-oaa": " / ".join(f"{fig2.loc[('low', f), 'OAA']:.2f}" for f in FORMATS),
        "cn-high-oaa": " / ".join(f"{fig2.loc[('high', f), 'OAA']:.3f}" for f in FORMATS),
        "cn-low-range": f"{fig2.loc['low', 'OAA'].min():.2f}-{fig2.loc['low', 'OAA'].max():.2f}",
        "cn-high-range": f"{fig2.loc['high', 'OAA'].min():.3f}-{fig2.loc['high', 'OAA'].max():.3f}",
        "cn-plain-high": f"{fig2.loc[('high', 'plain text'), 'OAA']:.3f} vs "
        f"{fig2.loc[('high', 'UUID (-)'), 'OAA']:.3f}",
        "cn-format": estimate_text(estimates["cnorm-format"]),
        "cn-uuid-high": f"{estimates['cnorm-format'].control:.2f}%",
        "cn-plain-items": int(plain["items"]),
        "cn-amp-low": f"{eff.loc[('low', 'modified UUID (&) - UUID'), 'difference']:+.0f}",
        "cn-format-min-p": f"{eff['p'].min():.2g}",
        "cn-sweep-oaa": ", ".join(
            f"{oaa.loc[d, 'OAA']:.2f} ({repr(d) if d else 'plain'})" for d in oaa.index
        ),
        "cn-r": f"{every['r']:.2f} [{every['ci_low']:.2f}, {every['ci_high']:.2f}]",
        "cn-r-fisher": f"[{corr['fisher'][0]:.2f}, {corr['fisher'][1]:.2f}]",
        "cn-r-uuid": f"{uuid['r']:.2f} [{uuid['ci_low']:.2f}, {uuid['ci_high']:.2f}]",
        "cn-uuid-formats": uuid["formats"],
        "cn-formats": every["formats"],
        "cn-sweep-examples": every["examples"],
        "cn-tokens-r": "r = {:+.2f} [{:+.2f}, {:+.2f}], {} delimiters, {}".format(
            *(
                getattr(estimates["cnorm-tokens"], f)
                for f in ("difference", "ci_low", "ci_high", "n")
            ),
            p_text(estimates["cnorm-tokens"].p),
        ),
        "cn-plain-shorter": f"{(oaa.drop(index='')['prompt tokens'].min() - oaa.loc['', 'prompt tokens']):,.0f}"
        if "" in oaa.index
        else "—",
    }


def _attention_quotes(shares: pd.DataFrame) -> dict:
    return {
        "cn-head": f"{100 * shares['head'].min():.0f}-{100 * shares['head'].max():.0f}%",
        "cn-tail": f"{100 * shares['tail'].min():.0f}-{100 * shares['tail'].max():.0f}%",
        "cn-middle": f"{100 * shares['middle'].min():.0f}-{100 * shares['middle'].max():.0f}%",
        "cn-abs-plain": "{:.2f}-{:.2f}".format(
            *shares[shares["format"] == "plain text"]["abs"].agg(["min", "max"])
        ),
        "cn-abs-uuid": "{:.2f}-{:.2f}".format(
            *shares[shares["format"] == "UUID (-)"]["abs"].agg(["min", "max"])
        ),
    }


def _selection_quotes(
    estimates: dict[str, Estimate],
    sel: pd.DataFrame,
    chosen: str,
    shortest: str,
    qa: pd.DataFrame,
    tests: pd.DataFrame,
    seeds: pd.DataFrame,
    stable: pd.DataFrame,
    ratios: pd.DataFrame,
    params: dict,
) -> dict:
    summary = selection_summary(sel)
    tokens = qa.groupby("method")["prompt_tokens"].mean()
    over = seeds.groupby("method")[["OAA", "OPA"]].mean()
    t = tests.set_index(["comparison", "seeds"])
    short_all = t.loc[("shortest tokenization - baseline", "all seeds")]
    s = stable.set_index("S")
    first = s["first S prompts choose"]
    switch = next(
        (k for k, v in first.items() if v == chosen and (first.loc[k:] == chosen).all()), None
    )
    at_8 = s.loc[min(8, len(s)), f"subsets choosing {chosen!r} (%)"]
    paper_s = min(8, params["calibration_questions"])
    cost = sel[sel["sample"] < paper_s]["seconds"].sum()
    gen_seconds = qa.loc[qa["method"] == "C-NORM", "seconds_per_prompt"].sum()
    per_prompt = sel[sel["sample"] < paper_s]
    return {
        "cn-abs-range": f"{summary['mean_ABS'].min():.3f} to {summary['mean_ABS'].max():.3f}",
        "cn-abs-none": f"{summary.loc[cn.NO_FORMAT, 'mean_ABS']:.3f}"
        if cn.NO_FORMAT in summary.index
        else "—",
        "cn-calibration": params["calibration_questions"],
        "cn-chosen": repr(chosen),
        "cn-shortest": repr(shortest),
        "cn-qa-tokens": f"{tokens['C-NORM']:,.0f} vs {tokens['baseline']:,.0f}",
        "cn-oaa": f"{over.loc['C-NORM', 'OAA']:.2f} against {over.loc['baseline', 'OAA']:.2f}",
        "cn-opa": f"{over.loc['C-NORM', 'OPA']:.2f} vs {over.loc['baseline', 'OPA']:.2f}",
        "cn-qa-questions": params["qa_questions"],
        "cn-orderings": len(params["qa_seeds"]),
        "cn-qa": estimate_text(estimates["cnorm-qa"]),
        "cn-qa-per-seed": ", ".join(
            f"{t.loc[('C-NORM - baseline', f'seed {x}'), 'difference']:+.0f}"
            for x in params["qa_seeds"]
        ),
        "cn-shortest-effect": f"{points_ci(short_all['difference'], short_all['ci_low'], short_all['ci_high'])}"
        f" points ({p_text(short_all['p'])})",
        "cn-switch-s": switch if switch is not None else "—",
        "cn-share-at-8": f"{at_8:.0f}%",
        "cn-ratio-choices": ", ".join(
            f"{r.chosen!r} at {r.p:g}" for r in ratios.sort_values("p").itertuples()
        ),
        "cn-cost": f"{cost / 60:.0f} minutes",
        "cn-cost-per-prompt": f"{cost / max(1, len(per_prompt)):.0f} s",
        "cn-generation-seconds": f"{gen_seconds:.0f} s",
        "cn-candidates": len(params["cnorm_candidates"]),
        "cn-paper-s": paper_s,
    }


def statements(view: CnormResult, params: dict, label: str) -> dict[str, bool]:
    """What the chapter's prose says in words, each as a check on the committed run."""
    mine = view.effects[view.effects["model"] == label]
    t = view.qa_tests.set_index(["comparison", "seeds"])
    shortest = ("shortest tokenization - baseline", "all seeds")
    subsets = view.stability.set_index("S")
    chosen_share = subsets.loc[
        min(8, params["calibration_questions"]), f"subsets choosing {view.chosen!r} (%)"
    ]
    return {
        "C-NORM on QA goes the opposite way, the format claim's premise fails, the token "
        "correlation is inconclusive": view.verdicts
        == {
            "cnorm-qa": "opposite direction",
            "cnorm-format": "premise not met",
            "cnorm-tokens": "inconclusive at this n",
        },
        "the exploratory contrast excludes zero": view.contrast.ci_high < 0,
        "no format comparison is significant": bool(
            (mine["p"] >= 0.5).all() and ((mine["ci_low"] <= 0) & (mine["ci_high"] >= 0)).all()
        ),
        "the bootstrap decides the correlation, Fisher's interval does not": view.correlations[
            "all"
        ]["ci_high"]
        < 0
        and view.correlations["fisher"][1] > 0,
        "attention mass sits at the ends": bool(
            (view.shares["tail"] > view.shares["middle"]).all()
            and (view.shares["head"] > 0.2).all()
        ),
        "C-NORM is below the baseline on every ordering, and the shortest tokenization too": bool(
            (t.loc["C-NORM - baseline", "difference"] < 0).all()
        )
        and t.loc[shortest, "ci_high"] < 0,
        "ABS chooses ':' and most subsets of 8 prompts agree": view.chosen == ":"
        and chosen_share > 50,
    }


@dataclass(kw_only=True)
class CnormResult(ChapterResult):
    """The chapter's numbers: ``params`` and ``results`` (what its figures and tables
    re-read), the delimiter ``selection`` with the ``chosen`` and ``shortest`` candidates,
    the QA comparison (``qa``, ``qa_tests``, ``per_seed``), the key-value formats (``kv``,
    ``grid``, ``effects``), the delimiter sweep (``swept``, ``delimiters``,
    ``correlations``, ``contrast``), the attention profiles (``attention``, ``shares``)
    and the selection's stability (``stability``, ``ratio_choice``)."""

    params: dict
    results: Path
    selection: pd.DataFrame
    chosen: str
    shortest: str
    qa: pd.DataFrame
    qa_tests: pd.DataFrame
    per_seed: pd.DataFrame
    kv: pd.DataFrame
    grid: pd.DataFrame
    effects: pd.DataFrame
    swept: pd.DataFrame
    delimiters: pd.DataFrame
    correlations: dict
    attention: list[dict]
    shares: pd.DataFrame
    stability: pd.DataFrame
    ratio_choice: pd.DataFrame
    contrast: Estimate


def answered(run: Run) -> list[dict]:
    """Every row of the chapter's plan for this run's reader (missing ones generated; the
    QA block is built from the stored attention rows)."""
    return run.answered()


def qa_text(view: CnormResult) -> FigureText:
    """:func:`qa_figure`'s caption and alt text, from the lines it draws."""
    shown = qa_accuracy(view.qa, view.params)
    n_of = shown.groupby("method")["n"].min()
    cells = shown.set_index(["method", "position"])["accuracy"]
    positions = sorted(shown["position"].unique())
    base = shown[shown["method"] == "baseline"]["accuracy"]
    others = shown[shown["method"] != "baseline"]
    below = all(
        cells[m, p] < cells["baseline", p]
        for m, p in others.set_index(["method", "position"]).index
    )
    caption = (
        f"Accuracy of baseline and C-NORM prompts against the gold document's position among "
        f"{view.params['qa_documents']} NQ-Open documents, pooled over "
        f"{len(view.params['qa_seeds'])} distractor orderings of the same "
        f"{view.params['qa_questions']} questions ({n_of.get('baseline', 0)} items per point; "
        "bands resample questions); the shortest-tokenization control ran on one ordering "
        f"({n_of.get('shortest tokenization', 0)} per point). {view.label}. C-NORM rewrites a "
        f"share {view.params['cnorm_ratio']} of each passage's sentences with the delimiter "
        f"attention balance selected ({view.chosen!r})."
    )
    alt = (
        f"Line chart of accuracy against gold position ({positions[0]} to {positions[-1]}): the "
        f"baseline goes from {percent_words(base.iloc[0])} to {percent_words(base.iloc[-1])}; C-NORM and the "
        "shortest-tokenization control lie "
        + ("below it at every position" if below else "above it at some positions")
        + f", between {percent_words(others['accuracy'].min())} and {percent_words(others['accuracy'].max())}."
    )
    return FigureText(caption, alt)


def formats_text(view: CnormResult) -> FigureText:
    """:func:`formats_figure`'s caption and alt text."""
    shown = figure2_accuracy(view.grid, view.params, view.label)
    n_of = shown.groupby("density")["n"].min()
    caption = (
        "Key-value retrieval by id format, "
        f"{view.label}: accuracy against the gold pair's position at low density "
        f"({view.params['kv_low_pairs']} pairs of 32-hex ids) and high density "
        f"({view.params['kv_high_pairs']} pairs of 128-hex ids); {n_of.get('low', 0)} examples "
        f"per point at low density and {n_of.get('high', 0)} at high density, 95% Wilson bands."
    )
    alt = (
        f"Two panels of accuracy against gold position for {', '.join(sorted(shown['format'].unique()))}"
        f"; every line stays between {percent_words(shown['accuracy'].min())} and "
        f"{percent_words(shown['accuracy'].max())}."
    )
    return FigureText(caption, alt)


def verdict_correlation(view: CnormResult) -> dict:
    """The correlation the figure's title shows: the claim's own (Pearson r over delimiters
    with Fisher's interval, as the findings page judges it), or, where the claim has no
    estimate, the per-example bootstrap one."""
    est = view.estimates.get("cnorm-tokens")
    if est is None:
        return {**view.correlations["all"], "how": "its bootstrap interval over examples"}
    return {
        "r": est.difference,
        "ci_low": est.ci_low,
        "ci_high": est.ci_high,
        "how": f"Fisher's interval over the {est.n} delimiters, as the findings page judges it",
    }


def tokens_text(view: CnormResult) -> FigureText:
    """:func:`tokens_figure`'s caption and alt text."""
    r = {**view.correlations["all"], **verdict_correlation(view)}
    caption = (
        "Mean prompt tokens against accuracy for each delimiter of the sweep "
        f"({view.params['sweep_pairs']} pairs, gold at depth "
        f"{', '.join(str(p) for p in view.params['sweep_positions'])} only, so accuracy at one "
        f"position rather than OAA; the same {r['examples']} examples per delimiter), "
        f"{view.label}. Whiskers: 95% bootstrap intervals over examples. Title: Pearson r with "
        f"{r['how']}."
    )
    alt = (
        f"Scatter plot of mean prompt tokens against accuracy for {len(view.delimiters)} "
        f"delimiters, with vertical interval whiskers; r = {r['r']:.2f} "
        f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]."
    )
    return FigureText(caption, alt)


def attention_text(view: CnormResult) -> FigureText:
    """:func:`attention_figure`'s caption and alt text."""
    positions = sorted({row["gold_position"] for row in view.attention})
    formats = sorted({row["format"] for row in view.attention})
    caption = (
        "Last-layer final-token attention over the prompt (log scale), summed over each of "
        f"{ATTENTION_BINS} equal slices of the prompt's tokens, for "
        f"{' and '.join(formats)} ids, {view.label}: one key-value example with its gold pair "
        f"at each of {len(positions)} positions (an illustration, not an estimate); ABS in the "
        "legend."
    )
    alt = (
        f"{len(formats)} panels of attention mass per slice against relative token position, one line "
        f"per gold position ({', '.join(str(p) for p in positions)})."
    )
    return FigureText(caption, alt)


@book_figure
def qa_figure(view: CnormResult):
    """Accuracy of baseline, C-NORM and the shortest-tokenization control against the gold
    document's position."""
    return accuracy_by_position(
        qa_accuracy(view.qa, view.params),
        x="position",
        facet="panel",
        hue="method",
        hue_order=["baseline", "C-NORM", "shortest tokenization"],
        facet_title="{}",
        xlabel="Position of the gold document",
        title=f"C-NORM ({view.chosen!r}, p = {view.params['cnorm_ratio']}) vs baseline",
        links=view.links,
    )


@book_figure
def formats_figure(view: CnormResult, model: str):
    """Figure 2: key-value accuracy by id format against the gold pair's position."""
    return accuracy_by_position(
        figure2_accuracy(view.grid, view.params, view.label),
        x="position",
        facet="panel",
        hue="format",
        facet_title="{}",
        xlabel="Position of the gold pair",
        title=f"Key-value retrieval by id format ({model})",
    )


@book_figure
def tokens_figure(view: CnormResult, model: str):
    """Mean prompt tokens against OAA, one point per delimiter of the sweep."""
    return tokens_vs_accuracy(
        view.delimiters,
        verdict_correlation(view),
        title=f"{view.params['sweep_pairs']} pairs, {model}",
        ylabel="Accuracy, gold in the middle (%)",
    )


@book_figure
def attention_figure(view: CnormResult):
    """Figure 4: final-token attention over the prompt for UUID and plain-text ids."""
    return attention_profiles(
        view.attention, ["UUID (-)", "plain text"], pairs=view.params["attention_pairs"]
    )


def selection_tables(view: CnormResult) -> list:
    """ABS per candidate delimiter, what it selects and what that cost, and the prompt
    tokens per QA method."""
    sel = view.selection
    said = (
        f"ABS selects **{view.chosen!r}**; the shortest tokenization is **{view.shortest!r}**. Scoring "
        f"{len(view.params['cnorm_candidates'])} candidates on S = {view.params['calibration_questions']} "
        f"prompts took {sel['seconds'].sum():.0f} s of forward passes on {sel['device'].iloc[0]}."
    )
    tokens = view.qa.groupby("method")["prompt_tokens"].mean().round(1).reset_index()
    return [
        selection_summary(sel).round(3).reset_index(),
        said,
        (tokens, "Mean prompt tokens by method."),
    ]


def seed_tables(view: CnormResult) -> list:
    """OAA and OPA per method and distractor ordering, then their mean and sd over orderings
    (the paper's way of reporting), and the rows' provenance."""
    over_seeds = view.per_seed.groupby("method")[["OAA", "OPA", "position_sd"]].agg(["mean", "std"])
    return [
        oaa_opa_shown(view.per_seed),
        "**Mean (and sd) over seeds**, the paper's way of reporting:",
        over_seeds.round(3).reset_index(),
    ]


def formats_tables(view: CnormResult, shown_chars: int = 420) -> list:
    """An example prompt with the modified (&) ids, Figure 2's OAA/OPA per density and format,
    and the rows' provenance."""
    grid_requests, _ = kv_requests(view.params)
    example = next(r.prompt for r in grid_requests if r.condition["delimiter"] == "&")[:shown_chars]
    return [
        "```text\n" + example + "\n...\n```",
        oaa_opa_shown(oaa_opa(view.grid, ["model", "density", "format"])),
        "**Data.** " + provenance(view.grid, view.results, KV),
    ]


def sweep_table(view: CnormResult) -> tuple[pd.DataFrame, str]:
    shown = (
        oaa_opa_shown(view.delimiters.drop(columns=["best_position", "position_sd"]))
        .drop(columns=["OPA (95% CI)"])
        .rename(columns={"OAA (95% CI)": "accuracy, gold in the middle (95% CI)"})
    )
    # one gold position: the sweep's accuracy is not the paper's OAA over positions
    return shown, (
        f"{view.params['sweep_pairs']} pairs, gold at depth {view.params['sweep_positions']}, "
        f"{view.swept['example_id'].nunique()} examples per delimiter."
    )


def correlation_shown(view: CnormResult) -> tuple[pd.DataFrame, str]:
    """The token/accuracy correlations and the longest-minus-shortest estimate, with the note."""
    order = view.delimiters["delimiter"].tolist()
    half = len(order) // 2
    note = (
        f"Longest: {', '.join(map(repr, order[-half:]))}; shortest: {', '.join(map(repr, order[:half]))}. "
        f"Bootstrap draws where r is undefined (all formats equal): "
        f"{view.correlations['all']['undefined_share']:.0%}."
    )
    return correlation_table(view.correlations, view.contrast, view.delimiters), note


def attention_table(view: CnormResult) -> tuple[pd.DataFrame, str]:
    table = (
        pd.DataFrame(view.attention)[["format", "gold_position", "tokens", "abs", "seconds"]]
        .merge(
            view.shares.drop(columns="abs").assign(
                **{k: 100 * view.shares[k] for k in ("head", "middle", "tail")}
            ),
            on=["format", "gold_position"],
        )
        .round({"abs": 3, "seconds": 1, "head": 1, "middle": 1, "tail": 1})
        .rename(
            columns={
                "format": "id format",
                "gold_position": "gold pair's position",
                "tokens": "prompt tokens",
                "abs": "ABS",
                "seconds": "seconds to measure",
                "head": "on the first tenth (%)",
                "middle": "on the eight tenths between (%)",
                "tail": "on the last tenth (%)",
            }
        )
    )
    return (
        table,
        "ABS: the Attention Balance Score of the final token's attention (section 4.2), on "
        "[0, 1] as the paper defines it; the percentages: the share of that attention on the "
        "prompt's first tenth, the eight tenths between and its last tenth.",
    )


def bench_tables(path: str = "data/bench/attention-cpu.json") -> list:
    """The committed attention benchmark (``scripts/bench_attention.py``), or how to make it."""
    bench_path = repo_root() / path
    if not bench_path.exists():
        return [f"No benchmark file at `{path}`; run `scripts/bench_attention.py --json {path}`."]
    bench = json.loads(bench_path.read_text())
    return [
        f"`{path}`: {bench['model']} on {bench['device']} ({bench['dtype']}, {bench['cpu_threads']} threads), "
        f"longctx {bench['longctx_version']}",
        pd.DataFrame(bench["rows"]),
    ]


def longbench_tables(view: CnormResult, run: Run) -> list:
    """LongBench-v2 with and without C-NORM (the chosen delimiter) when ``longbench_data``
    names a copy: accuracy by difficulty and length; the RAG setting only when every question
    carries retrieved chunks."""
    params = view.params
    if not params["longbench_data"]:
        return [
            "`longbench_data` is empty: LongBench-v2 did not run (the data is not reachable offline)."
        ]
    source = str(params["longbench_data"])
    examples = lb.load(
        source if source.startswith("THUDM/") else resolve(source),
        limit=params["longbench_limit"] or None,
    )
    settings = ["base"] + (["rag"] if all(e.retrieved for e in examples) else [])
    reader = run.reader
    tokenizer = load_tokenizer(reader.model)
    requests = [
        r
        for setting in settings
        for method, delimiter in [
            ("baseline", None),
            ("C-NORM", None if view.chosen == "none" else view.chosen),
        ]
        for r in lb.make_requests(
            examples,
            setting=setting,
            tokenizer=tokenizer,
            max_prompt_tokens=params["longbench_max_prompt_tokens"],
            delimiter=delimiter,
            ratio=params["cnorm_ratio"],
            method=method,
        )
    ]
    run.answered("longbench", lambda: [Block("LongBench-v2", "cnorm_longbench_v2", requests)])
    table = load_experiment(view.results, "cnorm_longbench_v2", score=lb.score, task=lb.TASK)
    return [lb.breakdown(table[table["model"] == reader.label]).round(1).reset_index()]


def stability_tables(view: CnormResult) -> list:
    """How the selection moves with the number of samples S and with the ratio p."""
    return [
        (
            view.stability,
            "The delimiter chosen from the first S prompts, and how often each wins over 500 "
            "subsets of size S.",
        ),
        (
            view.ratio_choice,
            "The delimiter chosen when the candidates are formatted at another ratio p.",
        ),
    ]


class CNorm(Chapter):
    """C-NORM chapter (context format and contextual normalization)."""

    name = "cnorm"
    order = 5  # where longctx reproduce runs its headline blocks among the chapters
    notebook = "notebooks/cnorm.py"
    claim_blocks = {
        "cnorm-qa": ("C-NORM selection", "C-NORM QA"),
        "cnorm-format": ("key-value formats",),
        "cnorm-tokens": ("key-value formats",),
    }
    experiments = (SELECTION, QA, KV, ATTENTION)  # the stores whose rows the chapter offers

    def plan(self, run: Run) -> list[Block]:
        return blocks(run.params)

    def claims(self, run: Run) -> dict[str, Estimate]:
        """C-NORM's claims, paired by question or example:

        * ``cnorm-qa``: C-NORM minus baseline OAA on the evaluated questions, per question
          averaged over its positions and orderings (the seeds reorder the same questions'
          distractors, so the question is the unit);
        * ``cnorm-format``: plain minus UUID ids at high density, per example over positions;
        * ``cnorm-tokens``: the paper's statistic over the delimiter sweep, Pearson r between
          tokens and accuracy over delimiters (:func:`token_correlation`).
        """
        params = run.params
        evaluated = {e.example_id for e in qa.read_oracle()[: params["qa_questions"]]}
        qa_rows = [
            r
            for r in run.rows(QA)
            if r["example_id"] in evaluated
            and r["condition"]["num_documents"] == params["qa_documents"]
            and r["condition"]["seed"] in params["qa_seeds"]
        ]
        kv_rows = run.rows(KV)
        high = {"density": "high", "num_pairs": params["kv_high_pairs"], "query_aware": False}
        swept = swept_rows(kv_rows, params)
        return estimable(
            {
                "cnorm-qa": lambda: paired_estimate(
                    by_unit(qa_rows, {"method": "baseline"}, qa.score),
                    by_unit(qa_rows, {"method": "C-NORM"}, qa.score),
                    side_names=("baseline", "C-NORM"),
                ),
                "cnorm-format": lambda: paired_estimate(
                    by_unit(kv_rows, {**high, "delimiter": "-"}, kv.score),
                    by_unit(kv_rows, {**high, "delimiter": ""}, kv.score),
                    side_names=("UUID", "plain text"),
                ),
                "cnorm-tokens": lambda: token_correlation(swept),
            }
        )

    def analyze(self, run: Run) -> CnormResult:
        """Everything the chapter shows from its stored rows: the delimiter selection, the QA
        comparison, the Figure 2 format grid, the delimiter sweep and its correlations, the
        attention profiles, the selection's stability, the findings page's estimates and
        verdicts, the numbers the prose quotes (``quoted``) and the statements it makes
        (``said``)."""
        params, reader, results_dir = run.params, run.reader, Path(run.results)
        answered(run)
        chosen_rows = selection(params, results_dir, reader)
        chosen, shortest, scores = choices(chosen_rows.to_dict("records"))
        qa_rows = qa_table(results_dir, params, reader, chosen, shortest)
        kv = kv_table(results_dir, reader)
        grid = figure2(kv, params)
        swept = sweep(kv, params, reader.label)
        delimiters = by_delimiter(swept)
        attention = attention_view(params, results_dir, reader)
        stable, ratio_choice = stability(scores, chosen, params, results_dir, reader)
        estimates = self.claims(run)
        view = CnormResult(
            label=reader.label,
            estimates=estimates,
            verdicts=chapter_verdicts("cnorm", estimates),
            params=params,
            results=results_dir,
            selection=chosen_rows,
            chosen=chosen,
            shortest=shortest,
            qa=qa_rows,
            links=point_links(qa_rows, ("model", "method", "gold_index"), results_dir, QA),
            qa_tests=qa_tests(qa_rows, params),
            per_seed=oaa_opa(qa_rows, ["method", "seed"]),
            kv=kv,
            grid=grid,
            effects=format_effects(grid),
            swept=swept,
            delimiters=delimiters,
            correlations=correlations(swept, delimiters, params["seed"]),
            attention=attention,
            shares=attention_shares(attention),
            stability=stable,
            ratio_choice=ratio_choice,
            contrast=format_contrast(swept_rows(run.rows(KV), params)),
            consistent=(
                len(qa_rows) > 0
                and not qa_rows.duplicated(
                    ["example_id", "method", "delimiter", "seed", "gold_index"]
                ).any()
            ),
        )
        view.quoted = quoted(
            view.estimates,
            view.selection,
            view.chosen,
            view.shortest,
            view.qa,
            view.qa_tests,
            view.per_seed,
            view.grid,
            view.effects,
            view.delimiters,
            view.correlations,
            view.shares,
            view.stability,
            view.ratio_choice,
            params,
            reader.label,
        )
        view.quoted.update(
            {"cn-tokens": estimate_text(view.contrast), "cn-tokens-detail": view.contrast.detail}
        )
        view.said = statements(view, params, reader.label)
        return view
