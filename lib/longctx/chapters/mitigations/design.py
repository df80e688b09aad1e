"""The mitigations chapter's design: every training-free fix for a lost middle applied to the
same multi-document QA prompts (Lost in the Middle's task: 20 documents, the NQ-Open gold
chunk among BM25 distractors, the gold first, in the middle and last), each arm a block of
the runner, paired by question with the baseline and with a random-shuffle control.

The arms:

* ``baseline`` and ``query_aware``: the multi-document QA chapter's own prompts, answered
  into its store (rows it already holds are reused);
* ``shuffle``: the same documents in a seeded random order, per question (Cuconasu et al.,
  2025: the control every reordering needs);
* ``reorder``: the documents by BM25 score against the question at both ends, the least
  relevant in the middle (LangChain's ``LongContextReorder``); the order depends on the
  documents, not on where the gold stood, so one prompt per question serves every position;
* ``instruction``: the baseline prompt with an instruction to read the middle too
  (``prompts/attention_instruction.prompt``);
* ``ms_poe``: the baseline prompt read with Ms-PoE's per-head position rescaling
  (a backend with rescaled positions);
* ``fitm``: Found in the Middle's calibration as a re-ranker: each document's share of the
  final token's attention minus the share an irrelevant document gets at that position
  (measured on prompts of distractors only), the best calibrated document placed at the
  edge where this reader's baseline is best;
* ``sort_1`` and ``sort_3``: attention sorting, the documents ordered by their share of the
  final token's attention, the most attended last, once or three times before answering;
* ``recite``: recite, then answer (Context Length Alone's remedy): the reader first copies
  the documents it finds relevant (``prompts/multidoc_recite.prompt``, the paper's
  recitation prompt over the same documents), then answers Lost in the Middle's prompt with
  only what it copied as its search results.

The attention arms read final-token attention through the runner's attention blocks (the
capability C-NORM uses), in the last ``attention_layers`` layers.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace

from ... import transforms as T
from ...attention import calibrated_relevance
from ...errors import ParameterError
from ...prompts import load_prompt
from ...requests import Request, StopRule
from ...retrieval import BM25Ranker
from ...runner import Block, positions_label
from ...tasks import multidoc_qa as qa
from ...tasks import ruler_qa as rq
from ...transforms import Example
from ..multidoc_qa import design as multidoc

EXPERIMENT = "mitigations"  # the arms' answers
ATTENTION = "mitigations_attention"  # each document's share of the final token's attention
READS = "final-token attention per document"  # the attention arms' first block
BASELINE = multidoc.EXPERIMENT  # the baseline and query-aware prompts are that chapter's

DEPTHS = multidoc.HEADLINE_DEPTHS  # gold first, in the middle, last
ARMS = (
    "shuffle",
    "reorder",
    "instruction",
    "query_aware",
    "ms_poe",
    "fitm",
    "sort_1",
    "sort_3",
    "recite",
)
ATTENTION_ARMS = ("fitm", "sort_1", "sort_3")
EDGES = ("first", "last")
INSTRUCTION_PROMPT = "attention_instruction"
RECITE_PROMPT = "multidoc_recite"


def check(params: dict) -> None:
    """Before any work: known arms, one size of at least three documents, Ms-PoE's ratios
    rising from at least 1, a positive number of attention layers and calibration prompts."""
    unknown = sorted(set(params["arms"]) - set(ARMS))
    if unknown:
        raise ParameterError(f"unknown arms {unknown}; the chapter's arms: {', '.join(ARMS)}")
    if params["num_documents"] < 3:
        raise ParameterError("num_documents must be at least 3 (first, middle and last differ)")
    low, high = params["ms_poe_ratios"]
    if not 1.0 <= low <= high:
        raise ParameterError(f"ms_poe_ratios must rise from at least 1.0, got {[low, high]}")
    if params["attention_layers"] < 1 or params["calibration_questions"] < 1:
        raise ParameterError("attention_layers and calibration_questions must be at least 1")


def layers(params: dict) -> tuple[int, ...]:
    """The attention layers read: the last ``attention_layers`` (Found in the Middle reads
    the upper half of its readers' layers)."""
    return tuple(range(-params["attention_layers"], 0))


def _attached(params: dict, questions, pool, distractors: int) -> list[qa.QAExample]:
    return qa.attach_distractors(
        questions, distractors, kind=params["distractors"], seed=params["seed"], pool=pool
    )


def examples(params: dict) -> list[Example]:
    """Every (question, gold position) of the baseline: ``num_documents`` documents, the
    gold first, in the middle and last, in the multi-document chapter's order."""
    questions, pool = multidoc.questions_for(params)
    k = params["num_documents"]
    out = []
    for raw in _attached(params, questions, pool, k - 1):
        ex = qa.to_example(raw)
        for idx in qa.position_indices(k, DEPTHS):
            out.append(
                T.apply(ex, [T.Competitors(k - 1), T.Position(idx + 1), T.QueryAware(False)])
            )
    return out


def calibration_items(params: dict) -> list[dict]:
    """Found in the Middle's positional bias: prompts of ``num_documents`` distractors and
    no gold (every document irrelevant), for the ``calibration_questions`` questions after
    the chapter's own, so no calibration question is a test question."""
    oracle = qa.read_oracle()
    start = params["num_questions"]
    questions = oracle[start : start + params["calibration_questions"]]
    if len(questions) < params["calibration_questions"]:
        raise ParameterError(
            f"calibration_questions {params['calibration_questions']}: only "
            f"{len(questions)} questions follow the chapter's {start}"
        )
    items = []
    for raw in _attached(params, questions, oracle, params["num_documents"]):
        docs = list(raw.distractors[: params["num_documents"]])
        items.append(
            {
                "prompt": qa.build_prompt(raw.question, docs),
                "documents": qa.document_lines(docs),
                "example_id": raw.example_id,
                "role": "calibration",
            }
        )
    return items


def _documents_of(ex: Example) -> list[qa.Document]:
    return [qa.Document(it.title, it.text) for it in ex.items]


def render(ex: Example, arm: str, **extra) -> Request:
    """The request of ``ex`` with the arm named in its condition (``mitigation``), so each
    arm's rows have keys of their own even where two arms write the same prompt."""
    req = qa.render(ex)
    return replace(req, condition={**req.condition, "mitigation": arm, **extra})


def recitation(ex: Example) -> Request:
    """Recite-then-answer's first step for ``ex``: the recitation prompt over the baseline's
    documents, the reader's copy of the ones it finds relevant as the output (the length-alone
    chapter's budget for a recitation, no stop at a newline)."""
    req = render(ex, "recite", step="recitation")
    documents = qa.format_documents(_documents_of(ex))
    prompt = load_prompt(RECITE_PROMPT).format(search_results=documents, question=ex.question)
    return replace(
        req,
        prompt=prompt,
        max_new_tokens=rq.RECITE_TOKENS,
        stop=StopRule(newline=False),
        meta={**req.meta, "question": ex.question},  # the second step asks it again
    )


def answer_from_recitation(rows: Sequence[dict]) -> list[Request]:
    """The second step: Lost in the Middle's prompt with only what each recitation copied as
    its search results (its ``# Document <n>`` blocks, numbered afresh; the whole output
    where it has none), answered and scored as the baseline is."""
    out = []
    for row in rows:
        copied = rq.parse_recitation(row["output"]) or [row["output"].strip()]
        results = "\n".join(f"Document [{i}] {text}" for i, text in enumerate(copied, start=1))
        prompt = load_prompt("qa").format(search_results=results, question=row["meta"]["question"])
        out.append(
            Request(
                qa.TASK,
                row["example_id"],
                prompt,
                tuple(row["gold"]),
                {**row["condition"], "step": "answer"},
                max_new_tokens=qa.MAX_NEW_TOKENS,
                stop=StopRule(newline=True),
                meta={"recited_documents": len(copied)},
            )
        )
    return out


def bm25_scores(ex: Example) -> tuple[float, ...]:
    """Each document's BM25 score against the question, over the prompt's documents."""
    ranker = BM25Ranker([f"{it.title} {it.text}" for it in ex.items])
    return tuple(float(s) for s in ranker.scores(ex.question))


def arranged(ex: Example, order: Sequence[int], label: str) -> Example:
    """``ex`` with its documents in ``order`` (indices into its items), written as an
    :class:`~longctx.transforms.Arrange` by rank, so the condition records the arrangement
    and where the gold stood before."""
    rank = [0.0] * len(order)
    for place, i in enumerate(order):
        rank[i] = float(place)
    return T.Arrange("ascending", tuple(rank), label=label).apply(ex)


def sorted_by_attention(mass: Sequence[float]) -> list[int]:
    """Attention sorting's order (Peysakhovich and Lerer, 2023): the documents by their
    share of the final token's attention, ascending, so the most attended stands last,
    next to the question; ties keep the current order."""
    return sorted(range(len(mass)), key=lambda i: mass[i])


def positional_bias(calibration_rows: Sequence[dict]) -> list[float]:
    """The mean share of attention an irrelevant document gets at each position."""
    masses = [r["document_mass"] for r in calibration_rows]
    if not masses:
        raise ParameterError("Found in the Middle needs calibration rows; none are stored")
    return [statistics.fmean(col) for col in zip(*masses)]


def _attention_item(ex: Example, order: Sequence[int], passes: int, gold_from: int) -> dict:
    """An attention item of a test prompt: ``order`` holds the baseline index of each
    document as it now stands, ``gold_from`` where the gold stood in the baseline."""
    docs = _documents_of(ex)
    return {
        "prompt": qa.render(ex).prompt,
        "documents": qa.document_lines(docs),
        "example_id": ex.example_id,
        "role": "test",
        "passes": passes,
        "order": list(order),
        "gold_from": gold_from,
    }


def _key(ex: Example) -> tuple[str, int]:
    return ex.example_id, ex.settings.get("arranged_from", ex.gold_index)


def attention_blocks(params: dict, baseline: list[Example], edge: str | None) -> Block:
    """Final-token attention of every baseline prompt (and of the calibration prompts):
    its second stage answers Found in the Middle's re-ranking and one pass of attention
    sorting, and measures the next pass for ``sort_3``. ``edge`` is where the reader reads
    best (``numbers.best_edge``); None leaves Found in the Middle out."""
    arms = set(params["arms"])
    by_key = {_key(ex): ex for ex in baseline}
    items = [_attention_item(ex, range(len(ex.items)), 0, _key(ex)[1]) for ex in baseline]
    if "fitm" in arms and edge is not None:
        items += calibration_items(params)
    lay = layers(params)

    def masses(asked: list[dict], rows: list[dict]) -> list[dict]:
        # rows are keyed by prompt, so two items asking the same prompt share one row: each
        # item keeps its own fields, the row gives the attention
        return [{**item, "document_mass": row["document_mass"]} for item, row in zip(asked, rows)]

    def sort_pass(asked: list[dict]):
        def followup(rows: list[dict]) -> list[Block]:
            tests = [r for r in masses(asked, rows) if r["role"] == "test"]
            passes = tests[0]["passes"] + 1 if tests else 1
            out: list[Request] = []
            again = []
            for r in tests:
                order = [r["order"][i] for i in sorted_by_attention(r["document_mass"])]
                label = f"attention, {passes} pass{'es' if passes > 1 else ''}"
                ex = arranged(by_key[(r["example_id"], r["gold_from"])], order, label)
                if passes == 1 and "sort_1" in arms:
                    out.append(render(ex, "sort_1"))
                if passes == params["sort_passes"] and "sort_3" in arms:
                    out.append(render(ex, "sort_3"))
                elif passes < params["sort_passes"] and "sort_3" in arms:
                    again.append(_attention_item(ex, order, passes, r["gold_from"]))
            name = f"attention sorting, pass {passes}"
            blocks = [Block(f"{name}: answers", EXPERIMENT, out)] if out else []
            if again:
                blocks.append(
                    Block(
                        f"attention sorting, pass {passes + 1}: attention",
                        ATTENTION,
                        [],
                        attention=again,
                        attention_layer=lay,
                        followup=sort_pass(again),
                        followup_experiment=EXPERIMENT,
                    )
                )
            return blocks

        return followup

    def first_stage(rows: list[dict]) -> list[Block]:
        blocks = sort_pass(items)(rows)
        if "fitm" in arms and edge is not None:
            measured = masses(items, rows)
            bias = positional_bias([r for r in measured if r["role"] == "calibration"])
            answers = []
            for r in (r for r in measured if r["role"] == "test"):
                order = sorted_by_attention(calibrated_relevance(r["document_mass"], bias))
                if edge == "first":
                    order = order[::-1]
                label = f"calibrated attention, best {edge}"
                ex = arranged(by_key[(r["example_id"], r["gold_from"])], order, label)
                answers.append(render(ex, "fitm"))
            blocks.insert(0, Block("Found in the Middle: answers", EXPERIMENT, answers))
        return blocks

    return Block(
        READS,
        ATTENTION,
        [],
        attention=items,
        attention_layer=lay,
        followup=first_stage,
        followup_experiment=EXPERIMENT,
    )


def blocks(params: dict, edge: str | None = None) -> list[Block]:
    """The chapter's blocks, headline first: the baseline, the two controls, then each fix.
    ``edge`` is where this reader reads best (``numbers.best_edge``, from its baseline rows);
    Found in the Middle's arm is planned only once it is known."""
    arms = set(params["arms"])
    baseline = examples(params)
    middle = qa.position_indices(params["num_documents"], (0.5,))[0]
    out = [Block("baseline", BASELINE, [qa.render(ex) for ex in baseline], True)]
    if "shuffle" in arms:
        shuffle = T.Arrange("shuffle", seed=params["seed"])
        out.append(
            Block(
                "random shuffle",
                EXPERIMENT,
                [render(shuffle(ex), "shuffle") for ex in baseline],
                True,
            )
        )
    if "reorder" in arms:
        out.append(
            Block(
                "reorder by BM25 at the edges",
                EXPERIMENT,
                [
                    render(T.Arrange("edges", bm25_scores(ex), label="bm25")(ex), "reorder")
                    for ex in baseline
                    if ex.gold_index == middle
                ],
                True,
            )
        )
    if "instruction" in arms:
        instruct = T.Instruction(INSTRUCTION_PROMPT)
        out.append(
            Block(
                "attention instruction",
                EXPERIMENT,
                [render(instruct(ex), "instruction") for ex in baseline],
            )
        )
    if "query_aware" in arms:
        out.append(
            Block(
                "query-aware contextualization",
                BASELINE,
                [qa.render(T.QueryAware(True)(ex)) for ex in baseline],
            )
        )
    if "ms_poe" in arms:
        ratios = tuple(params["ms_poe_ratios"])
        label = positions_label(ratios)
        requests = [render(ex, "ms_poe", positions=label) for ex in baseline]
        out.append(Block("Ms-PoE", EXPERIMENT, requests, positions=ratios))
    if "recite" in arms:
        out.append(
            Block(
                "recite then answer: recitations",
                EXPERIMENT,
                [recitation(ex) for ex in baseline],
                followup=lambda rows: Block(
                    "recite then answer: answers", EXPERIMENT, answer_from_recitation(rows)
                ),
            )
        )
    if arms & set(ATTENTION_ARMS):
        out.append(attention_blocks(params, baseline, edge))
    return out


# The stores the chapter offers for download
EXPERIMENTS = (EXPERIMENT, ATTENTION)

# Each fix -> the words naming the claims-scale blocks its rows come from (an attention arm's
# include the attention reads its order was made from); claim_blocks adds the baseline or the
# random shuffle for each comparison.
_FIX_BLOCKS = {
    "reorder": ("reorder",),
    "fitm": (READS, "Found in the Middle"),
    "sort_1": (READS, "attention sorting, pass 1:"),
    "sort_3": (READS, "attention sorting, pass 2:", "attention sorting, pass 3:"),
    "ms_poe": ("Ms-PoE",),
    "instruction": ("attention instruction",),
    "query_aware": ("query-aware",),
    "recite": ("recite then answer",),
}


def claim_id(arm: str) -> str:
    """The claim that judges ``arm`` against the baseline (``-vs-shuffle`` added: against the
    random shuffle), as the claims files name it."""
    return "mit-" + arm.replace("_", "-")


def claim_blocks(arms) -> dict[str, tuple[str, ...]]:
    """The claims of the fixes among ``arms``, each -> the blocks its rows come from: the
    claims a run of those arms can judge."""
    out = {}
    for arm in (a for a in _FIX_BLOCKS if a in arms):
        out[claim_id(arm)] = ("baseline", *_FIX_BLOCKS[arm])
        out[f"{claim_id(arm)}-vs-shuffle"] = ("random shuffle", *_FIX_BLOCKS[arm])
    return out


FIXES = tuple(_FIX_BLOCKS)  # every arm but the shuffle, in the claims files' order
CLAIM_BLOCKS = claim_blocks(ARMS)  # every fix's claims, pre-registered before any row
