"""The crossing chapter's design: the requests a run asks, cut into blocks headline
first (what ``longctx reproduce`` and the cost plan read), and what they are built from."""

from __future__ import annotations

from ... import transforms as T
from ...errors import ParameterError
from ...runner import Block
from ...tasks import multidoc_qa as qa
from . import factorial as X

EXPERIMENT = "crossing"

FACTOR_ORDER = ("distractors", "format", "tags", "position", "filler", "query_aware")


def factors(params: dict) -> list[X.Factor]:
    k = params["num_documents"] - 1
    seed = params["seed"]
    every = {
        "position": X.Factor(
            "position",
            "first",
            "middle",
            (T.Position(1),),
            (T.Position(0.5),),
            "Lost in the Middle",
            -1,
            "the middle of the context is read worst",
        ),
        "format": X.Factor(
            "format",
            "as is",
            "C-NORM",
            (),
            (T.Normalize(params["cnorm_delimiter"], params["cnorm_ratio"], seed=seed),),
            "C-NORM",
            +1,
            "normalized passages are read better",
        ),
        "tags": X.Factor(
            "tags",
            "none",
            "spaCy + definitions",
            (),
            (T.Tags("spacy", True),),
            "TAG",
            +1,
            "tags with definitions help retrieval from long contexts",
        ),
        "distractors": X.Factor(
            "distractors",
            "hard",
            "far",
            (T.Competitors(k, "hard"),),
            (T.Competitors(k, "far", params["far_from"], seed=seed),),
            "semantic competition",
            +1,
            "far-ranked distractors hurt less than hard ones",
        ),
        "filler": X.Factor(
            "filler",
            "none",
            f"{params['filler_tokens']} whitespace",
            (),
            (T.Padding("whitespace", params["filler_tokens"], "between"),),
            "context length alone",
            -1,
            "length alone hurts",
        ),
        "query_aware": X.Factor(
            "query_aware",
            "off",
            "on",
            (),
            (T.QueryAware(),),
            "Lost in the Middle",
            0,
            "query-aware contextualization barely changes multi-document QA",
        ),
    }
    unknown = set(params["factors"]) - set(every)
    if unknown:
        raise ParameterError(
            f"unknown crossing factors {sorted(unknown)}; known: {', '.join(every)}"
        )
    if "distractors" not in params["factors"]:
        raise ParameterError("the distractors factor builds the context; keep it among the factors")
    return [every[name] for name in FACTOR_ORDER if name in params["factors"]]


def factorial_design(params: dict) -> X.Design:
    return X.two_level_design(factors(params), params["fraction"])


def examples(params: dict) -> list[T.Example]:
    """The first ``num_questions`` NQ-Open oracle questions with the ``pool_size`` BM25-ranked
    chunks of the oracle pool as candidates (far draws come from its bottom half)."""
    oracle = qa.read_oracle()
    attached = qa.attach_distractors(
        oracle[: params["num_questions"]], params["pool_size"], pool=oracle
    )
    return [qa.to_example(e) for e in attached]


def blocks(params: dict) -> list[Block]:
    d = factorial_design(params)
    reqs = X.requests(d, examples(params), order=[f.name for f in d.factors])
    # Example by example: effects are clustered by question, so a partial run must hold whole ones.
    return [
        Block(
            f"{len(d.cells)} cells x {params['num_questions']} questions",
            EXPERIMENT,
            reqs,
            True,
            whole_units=True,
        )
    ]


# The stores the chapter offers for download
EXPERIMENTS = (EXPERIMENT,)

# Each claim -> the words naming the claims-scale blocks its rows come from (the chapter's
# claim_blocks: what `longctx reproduce --scale claims` runs for it).
CLAIM_BLOCKS = {
    f"crossing-{factor}": ("cells x",)
    for factor in ("position", "format", "tags", "distractors", "filler", "query_aware")
}
