"""The C-NORM chapter's design: the requests a run asks, cut into blocks headline
first (what ``longctx reproduce`` and the cost plan read), and what they are built from."""

from __future__ import annotations

from ...formats import delimiter_label
from ...requests import Request, unique_requests
from ...runner import Block
from ...tasks import kv_retrieval as kv
from ...tasks import multidoc_qa as qa
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

    def cells(delimiters: str, density: str, prefix: str, examples: str) -> list[Request]:
        return cn.kv_format_requests(
            delimiters=params[delimiters],
            density=density,
            num_pairs=params[f"{prefix}_pairs"],
            positions=params[f"{prefix}_positions"],
            examples=params[examples],
            seed=params["seed"],
        )

    grid = cells("kv_formats", "low", "kv_low", "kv_examples") + cells(
        "kv_formats", "high", "kv_high", "kv_high_examples"
    )
    sweep = cells("sweep_delimiters", "low", "sweep", "sweep_examples")
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


# The stores the chapter offers for download
EXPERIMENTS = (SELECTION, QA, KV, ATTENTION)

# Each claim -> the words naming the claims-scale blocks its rows come from (the chapter's
# claim_blocks: what `longctx reproduce --scale claims` runs for it).
CLAIM_BLOCKS = {
    "cnorm-qa": ("C-NORM selection", "C-NORM QA"),
    "cnorm-format": ("key-value formats",),
    "cnorm-tokens": ("key-value formats",),
}
