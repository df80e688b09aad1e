"""The C-NORM chapter's numbers: what its analysis computes from the rows (scored rows,
cells, estimates' sides, the numbers the prose quotes and the statements it makes)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...claims import (
    Estimate,
    NoPairedUnits,
    by_unit,
    paired_estimate,
)
from ...formats import delimiter_label
from ...metrics import pearson_interval
from ...reader import Reader
from ...report import estimate_text, p_text, points_ci
from ...results import in_points, paired_comparison
from ...runner import Block, answer
from ...tables import rows_table, shared_fields
from ...tasks import kv_retrieval as kv
from ...tasks import multidoc_qa as qa
from ..contract import ChapterResult
from . import method as cn
from .design import (
    ATTENTION,
    KV,
    QA,
    SELECTION,
    attention_items,
    kv_requests,
    qa_examples,
    selection_items,
)


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
    # its rows, for a link to them: each delimiter's condition (the fields all its rows share;
    # a nested field is left out, as a link's filter names only flat ones)
    swept_conditions = tuple(
        {
            k: v
            for k, v in shared_fields([r["condition"] for r in rows[d]]).items()
            if not isinstance(v, dict)
        }
        for d in order
    )
    return Estimate(
        r,
        low,
        high,
        len(order),
        p,
        detail,
        facts=facts,
        sides=(swept_conditions, swept_conditions),
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
                        **in_points(res),
                    }
                )
    return pd.DataFrame(out)


def oaa_opa(table: pd.DataFrame, by) -> pd.DataFrame:
    """OAA and OPA with their intervals (numbers; :func:`oaa_opa_shown` writes them for readers)."""
    return cn.oaa_opa_table(table, list(by))


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
                    **in_points(res),
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


def quoted(view: CnormResult) -> dict:
    """Every number the chapter's prose quotes, by glue key: the formats and the delimiter
    sweep, the attention profiles, and the selection with its QA comparison."""
    return {
        **_format_quotes(
            view.estimates, view.grid, view.effects, view.delimiters, view.correlations, view.label
        ),
        **_attention_quotes(view.shares),
        **_selection_quotes(view),
        **_design_quotes(view.params),
    }


def _design_quotes(params: dict) -> dict:
    """The run's sizes, as the scale sets them, for the prose that names them."""
    return {
        "cn-kv-examples": params["kv_examples"],
        "cn-kv-high-examples": params["kv_high_examples"],
        "cn-kv-low-pairs": params["kv_low_pairs"],
        "cn-kv-high-pairs": params["kv_high_pairs"],
        "cn-qa-questions": params["qa_questions"],
        "cn-sweep-pairs": params["sweep_pairs"],
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
        "cn-sweep-delimiters": len(oaa),
        "cn-sweep-half": len(oaa) // 2,  # the longest and shortest formats contrasted
        "cn-sweep-tokens": f"{round(oaa['prompt tokens'].mean(), -2):,.0f}",
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


def _selection_quotes(view: CnormResult) -> dict:
    estimates, sel, chosen = view.estimates, view.selection, view.chosen
    qa, params, tests, seeds = view.qa, view.params, view.qa_tests, view.per_seed
    stable, ratios = view.stability, view.ratio_choice
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
        "cn-shortest": repr(view.shortest),
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
