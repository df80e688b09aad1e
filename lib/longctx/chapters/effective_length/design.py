"""The effective-length sweep: the same needles at every length, from NoLiMa's short base
(250, 500 and 1K tokens) to the reader's window, each needle at one of five depths in turn,
lengths counted with the reader's own tokenizer. Two needle kinds:

* ``kv``: Lost in the Middle's key-value records (a literal match: the question names the
  key), needle *i* one gold pair whose distractors are the first of one seeded stream, as
  many as the length holds (:func:`longctx.tasks.kv_retrieval.sized_needles`);
* ``qa``: the tagging chapter's needle questions in Paul Graham essays (NoLiMa-like: the
  question shares few words with its needle), every question of the project's needle sets,
  the haystack cut to the length (:func:`longctx.tasks.tag_needles.make_requests`).

A length is the context's tokens (records or haystack), the prompt's template and question
beside it; at a length the window cannot hold with ``RESERVE`` tokens to spare, the context
is cut to what it can (the row's ``context_tokens``), and lengths beyond the window are not
asked. The blocks come claim first: the base lengths and the longest length within half
the window (what the pre-registered claim compares), then the other lengths, shortest first.
"""

from __future__ import annotations

from dataclasses import replace

from ...effective_length import NOLIMA_BASE_LENGTHS, tokens_text
from ...errors import ParameterError
from ...models import ALIASES, DEFAULT_MODEL
from ...requests import Request
from ...runner import Block
from ...tasks import kv_retrieval as kv
from ...tasks import tag_needles as tn
from ..scales import read_scales

EXPERIMENT = "effective_length"
KINDS = ("kv", "qa")
KIND_NAMES = {"kv": "key-value records", "qa": "needle questions"}
# Tokens kept free beside the context: the chat template, the task's instruction and
# question, and the answer's budget (96 tokens for a key-value answer).
RESERVE = 256


def check(params: dict) -> None:
    """Before any work: known needle kinds, a grid that holds NoLiMa's base, a needle count."""
    unknown = sorted(set(params["kinds"]) - set(KINDS))
    if unknown:
        raise ParameterError(f"unknown needle kinds {unknown}; the sweep's kinds: {list(KINDS)}")
    missing = sorted(set(NOLIMA_BASE_LENGTHS) - set(params["lengths"]))
    if missing:
        raise ParameterError(
            f"lengths {params['lengths']} lack {missing}: NoLiMa's base is the mean at "
            f"{list(NOLIMA_BASE_LENGTHS)} tokens"
        )
    if params["kv_needles"] < 1:
        raise ParameterError("kv_needles must be at least 1")


def grid(params: dict, window: int | None) -> list[int]:
    """The lengths this reader is asked at: those its window holds (all of them where the
    window is not known)."""
    return sorted(n for n in params["lengths"] if window is None or n <= window)


def budget(length: int, window: int | None) -> int:
    """The context's tokens at ``length``: the length, or what the window holds beside
    ``RESERVE`` tokens where it cannot hold the whole length."""
    return length if window is None else min(length, window - RESERVE)


def claim_lengths() -> list[int]:
    """The grid the claim's length is chosen from: the sweep scale's lengths (the whole
    design), whatever scale a run asks (a book run to 4K does not move the claim of a
    32K-token window)."""
    return list(read_scales("effective_length")["sweep"]["lengths"])


def read_params(params: dict) -> dict:
    """The parameters every reader's rows are read at: ``params`` with the sweep scale's
    lengths added, so a page or table asked at the book's lengths still shows the lengths a
    reader has answered beyond them (curves stop at the first length not complete)."""
    return {**params, "lengths": sorted(set(params["lengths"]) | set(claim_lengths()))}


def reader_claim_length(window: int | None) -> int | None:
    """The length the half-window claim reads for a reader of ``window`` tokens: the longest
    within half the window on :func:`claim_lengths` (None: no window, or no such length)."""
    return claim_length(grid({"lengths": claim_lengths()}, window), window)


def default_claim_length() -> int | None:
    """The default reader's claim length (its alias states its window)."""
    return reader_claim_length(ALIASES[DEFAULT_MODEL].window)


def claim_blocks(book_lengths: list[int]) -> dict[str, tuple[str, ...]]:
    """The claims the book can judge: both kinds' once the book's lengths hold the default
    reader's claim length (its rows answered there), none before; the rules wait in
    ``data/paper/preregistered.csv`` until then."""
    return dict(CLAIM_BLOCKS) if default_claim_length() in book_lengths else {}


def claim_length(lengths: list[int], window: int | None) -> int | None:
    """The longest of ``lengths`` within half the window, NoLiMa's base aside: where the
    pre-registered claim asks whether accuracy has fallen below NoLiMa's bar (None: no
    window, or no such length). The claim reads it on :func:`claim_lengths`."""
    if window is None:
        return None
    within = [n for n in lengths if n <= window // 2 and n not in NOLIMA_BASE_LENGTHS]
    return max(within, default=None)


def kv_requests(params: dict, tokenizer, window: int | None, lengths: list[int]) -> list[Request]:
    """Every key-value needle at each of ``lengths``, needle *i* at depth ``depths[i % 5]``."""
    budgets = {n: budget(n, window) for n in lengths}
    needles = kv.sized_needles(
        params["kv_needles"], sorted(set(budgets.values())), tokenizer, seed=params["seed"]
    )
    depths = params["depths"]
    out = []
    for length, size in budgets.items():
        for i, sized in enumerate(needles[size]):
            depth = float(depths[i % len(depths)])
            (req,) = kv.make_requests(
                [sized.example],
                [depth],
                source="sized",
                extra_condition={"needle_kind": "kv", "length": length, "depth": depth},
            )
            out.append(replace(req, meta={**req.meta, "context_tokens": sized.tokens}))
    return out


def qa_cases(params: dict, text: str) -> list[tn.NeedleCase]:
    """Every question of ``needle_sets`` (or the first ``num_cases`` seeded ones of each),
    in set order: the tagging chapter's headline cases."""
    out = []
    for source in params["needle_sets"]:
        out += tn.load_cases(source, n=params["num_cases"], avoid_text=text, seed=params["seed"])
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise ParameterError(f"needle sets {params['needle_sets']} share case ids")
    return out


def qa_requests(params: dict, tokenizer, window: int | None, lengths: list[int]) -> list[Request]:
    """Every needle question at each of ``lengths``, case *i* at depth ``depths[i % 5]``, the
    untagged prompt of the tagging chapter (its baseline)."""
    text = tn.haystack_text()
    cases = qa_cases(params, text)
    out = []
    for length in lengths:
        for req in tn.make_requests(
            cases,
            tokenizer=tokenizer,
            lengths=[budget(length, window)],
            variants=["baseline"],
            depths=params["depths"],
            depth_mode="rotate",
            strategy=params["chunk_strategy"],
            max_chars=params["chunk_chars"],
            text=text,
        ):
            condition = {**req.condition, "needle_kind": "qa", "length": length}
            out.append(replace(req, condition=condition))
    return out


BUILDERS = {"kv": kv_requests, "qa": qa_requests}


def blocks(params: dict, tokenizer, window: int | None) -> list[Block]:
    """One block per needle kind and length, the claim's first (NoLiMa's base and the
    longest length within half the window), then the others shortest first."""
    check(params)
    lengths = grid(params, window)
    claimed = reader_claim_length(window)
    first = [n for n in lengths if n in NOLIMA_BASE_LENGTHS or n == claimed]
    order = [(kind, n, True) for kind in params["kinds"] for n in first]
    order += [(kind, n, False) for n in lengths if n not in first for kind in params["kinds"]]
    # each kind's needles, haystack and key-value streams made once, for every length
    asked = {kind: BUILDERS[kind](params, tokenizer, window, lengths) for kind in params["kinds"]}
    out = []
    for kind, length, headline in order:
        requests = [r for r in asked[kind] if r.condition["length"] == length]
        where = CLAIMED if headline else " at"
        name = f"{KIND_NAMES[kind]}{where} {tokens_text(length)} tokens"
        out.append(Block(name, EXPERIMENT, requests, headline=headline))
    return out


CLAIMED = ", the claim's lengths:"  # in the name of each block the claim reads
# The stores the chapter offers for download
EXPERIMENTS = (EXPERIMENT,)
# Each claim -> the words naming the claims-scale blocks its rows come from
CLAIM_BLOCKS = {
    "el-kv-half-window": (f"{KIND_NAMES['kv']}{CLAIMED}",),
    "el-qa-half-window": (f"{KIND_NAMES['qa']}{CLAIMED}",),
}
