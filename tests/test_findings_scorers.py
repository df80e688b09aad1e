"""Every findings claim recomputed by an independent scorer: each metric is written out again
from its paper's definition, applied to the raw committed rows, averaged per independent unit
and differenced, with no analysis code of the library (only its data loaders, to know which
questions a scale asks). The findings table must print the same difference and n.

(tests/test_findings.py holds the scorers for the claims covered first: KV middle, open
domain, GSM8K essay, RULER and TAG at 250 tokens.)"""

import json
import re
import string
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from longctx.chapters import scale
from longctx.store import ResultsStore
from longctx.tasks import multidoc_qa as qa

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "data" / "results"
MODEL = "qwen2.5-coder-0.5b-instruct"


@pytest.fixture(scope="module")
def by_id(committed_findings):
    return committed_findings.set_index("id")


def _rows(experiment):
    return ResultsStore(RESULTS, MODEL, experiment).rows()


def _norm(text):
    """SQuAD's normalization: lowercase, no ASCII punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return " ".join(w for w in text.split() if w not in {"a", "an", "the"})


def _first_line(output):
    return output.split("\n")[0].strip()


def _litm_qa(row):
    """Lost in the Middle: a normalized gold answer inside the normalized first line."""
    line = _norm(_first_line(row["output"]))
    return float(any(_norm(g) in line for g in row["gold"]))


def _kv(row):
    return float(row["gold"][0].lower() in row["output"].lower())


def _per_unit(rows, keep, score, unit=lambda r: r["example_id"]):
    sums = defaultdict(list)
    for r in rows:
        if keep(r["condition"]):
            sums[unit(r)].append(score(r))
    return {u: sum(v) / len(v) for u, v in sums.items()}


def _difference(control, treatment):
    units = sorted(set(control) & set(treatment))
    return 100 * sum(treatment[u] - control[u] for u in units) / len(units), len(units)


def _assert_claim(by_id, claim, control, treatment):
    want, n = _difference(control, treatment)
    row = by_id.loc[claim]
    assert row["n"] == n and row["difference"] == pytest.approx(want), claim


def test_multidoc_claims(by_id):
    params = scale("multidoc_qa", "book")
    keep = {q.example_id for q in qa.read_oracle()[: params["num_questions"]]}
    rows = [r for r in _rows("multidoc_qa") if r["example_id"] in keep]

    def at(index):
        return _per_unit(
            rows,
            lambda c: (
                c.get("setting") == "documents"
                and c["num_documents"] == 20
                and not c["query_aware"]
                and c["distractors"] == "bm25"
                and not c["random_order"]
                and c["gold_index"] == index
            ),
            _litm_qa,
        )

    first, middle, last = at(0), at(9), at(19)  # the middle of 20: index floor(0.5 * 19)
    edges = {u: (first[u] + last[u]) / 2 for u in set(first) & set(last)}
    _assert_claim(by_id, "litm-qa-u-shape", edges, middle)
    closed = _per_unit(rows, lambda c: c.get("setting") == "closed-book", _litm_qa)
    _assert_claim(by_id, "litm-qa-closed-book", closed, middle)
    assert by_id.loc["litm-qa-closed-book", "verdict"] == "premise not met"
    assert 100 * sum(closed.values()) / len(closed) < 20  # the premise's floor


def test_cnorm_claims(by_id):
    from longctx.chapters import cnorm

    params = scale("cnorm", "book")
    keep = {q.example_id for q in qa.read_oracle()[: params["qa_questions"]]}
    qa_rows = [
        r
        for r in _rows("cnorm_qa")
        if r["example_id"] in keep
        and r["condition"]["num_documents"] == params["qa_documents"]
        and r["condition"]["seed"] in params["qa_seeds"]
    ]
    _assert_claim(
        by_id,
        "cnorm-qa",
        _per_unit(qa_rows, lambda c: c["method"] == "baseline", _litm_qa),
        _per_unit(qa_rows, lambda c: c["method"] == "C-NORM", _litm_qa),
    )
    kv_rows = _rows("cnorm_kv")

    def high(delimiter):
        return lambda c: (
            c.get("density") == "high"
            and c.get("num_pairs") == params["kv_high_pairs"]
            and not c.get("query_aware")
            and c.get("delimiter") == delimiter
        )

    uuid = _per_unit(kv_rows, high("-"), _kv)
    _assert_claim(by_id, "cnorm-format", uuid, _per_unit(kv_rows, high(""), _kv))
    # The premise: UUID accuracy leaves less room than the paper's +9.5.
    room = 100 - 100 * sum(uuid.values()) / len(uuid)
    assert (room < 9.5) == (by_id.loc["cnorm-format", "verdict"] == "premise not met")

    # Figure 3's statistic: Pearson r over delimiters, tokens against accuracy.
    _, sweep = cnorm.design.kv_requests(params)
    planned = {(r.example_id, r.condition["gold_index"], r.condition["delimiter"]) for r in sweep}
    tokens, hits = defaultdict(list), defaultdict(list)
    for r in kv_rows:
        c = r["condition"]
        if (
            c.get("density") == "low"
            and c.get("num_pairs") == params["sweep_pairs"]
            and (r["example_id"], c["gold_index"], c["delimiter"]) in planned
        ):
            tokens[c["delimiter"]].append(r["prompt_tokens"])
            hits[c["delimiter"]].append(_kv(r))
    x = [np.mean(tokens[d]) for d in tokens]
    y = [np.mean(hits[d]) for d in tokens]
    row = by_id.loc["cnorm-tokens"]
    assert row["n"] == len(x) and row["difference"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    # Fisher's interval by hand
    z, se = np.arctanh(row["difference"]), 1 / np.sqrt(len(x) - 3)
    assert row["ci_low"] == pytest.approx(np.tanh(z - 1.959964 * se), abs=1e-4)
    assert row["ci_high"] == pytest.approx(np.tanh(z + 1.959964 * se), abs=1e-4)


def test_semantic_competition_claims(by_id):
    rows = _rows("semantic_competition")
    params = scale("semantic_competition", "book")
    size, kept = params["matched_size"], params["keep_hard"]

    def em(row):
        line = _norm(_first_line(row["output"]))
        return float(any(line == _norm(g) for g in row["gold"]))

    def inclusion(row):
        line = _norm(_first_line(row["output"]))
        return float(any(_norm(g) and _norm(g) in line for g in row["gold"]))

    def cond(num_hard, num_far, snippets):
        return lambda c: (
            c.get("corpus") == "squad-v2-dev"
            and c.get("snippet_words") == params["snippet_words"]
            and c.get("num_hard") == num_hard
            and c.get("num_far", 0) == num_far
            and c.get("num_snippets") == snippets
            and (snippets == 1 or c.get("retriever") == "bm25")
        )

    hard, far, gold = cond(size - 1, 0, size), cond(kept, size - 1 - kept, size), cond(0, 0, 1)
    _assert_claim(by_id, "sc-far-minus-hard", _per_unit(rows, hard, em), _per_unit(rows, far, em))
    _assert_claim(
        by_id,
        "sc-far-minus-hard-inclusion",
        _per_unit(rows, hard, inclusion),
        _per_unit(rows, far, inclusion),
    )
    _assert_claim(by_id, "sc-hard-hurts", _per_unit(rows, gold, em), _per_unit(rows, hard, em))


def _gsm8k_answers():
    lines = (ROOT / "data" / "public" / "gsm8k-test.jsonl").read_text().splitlines()
    return {
        f"gsm8k-{k}": json.loads(line)["answer"].split("####")[-1].strip().replace(",", "")
        for k, line in enumerate(lines)
    }


@pytest.mark.parametrize(
    "claim,filler,placement",
    [
        ("la-whitespace", "whitespace", "between"),
        ("la-mask", "mask", "between"),
        ("la-before", "whitespace", "before"),
    ],
)
def test_length_alone_claims(by_id, claim, filler, placement):
    import re

    answers = _gsm8k_answers()

    def correct(row):
        found = re.findall(
            r"answer is[:\s*$\\{}boxed]*(-?\d[\d,]*(?:\.\d+)?)", row["output"], flags=re.I
        ) or re.findall(r"-?\d[\d,]*(?:\.\d+)?", row["output"])
        gold = answers[row["example_id"]]
        return float(bool(found) and float(found[-1].replace(",", "")) == float(gold))

    rows = [r for r in _rows("length_alone") if r["condition"].get("subtask") == "gsm8k"]
    # The book's problems: those asked with no filler and at the filler kind's 16K tokens.
    short = _per_unit(rows, lambda c: c["filler_tokens"] == 0 and c["mode"] == "solve", correct)
    long = _per_unit(
        rows,
        lambda c: (
            c["filler"] == filler
            and c["placement"] == placement
            and c["filler_tokens"] == 16000
            and c["mode"] == "solve"
        ),
        correct,
    )
    _assert_claim(by_id, claim, short, long)


@pytest.mark.parametrize("claim,filler", [(f"la-{k}", k) for k in ("essay", "whitespace", "mask")])
def test_length_alone_recitation_premise(by_id, claim, filler):
    """The paper's exact match, read against each row's own prompt rather than the task's
    problems: the recited description, analysis and question must equal the prompt's
    sections character for character (outer whitespace aside). Until every one of the 120
    problems is recited the premise is not measured (NaN) and the claim unjudged, unless the
    stored failures already cap the rate below the paper's 90.9%."""
    problems = {
        r["example_id"]
        for r in _rows("length_alone")
        if r["condition"].get("subtask") == "gsm8k" and r["condition"]["filler_tokens"] == 0
    }

    def between(text, start, ends):
        tail = text.split(start, 1)[1]
        cut = min((tail.find(e) for e in ends if e in tail), default=len(tail))
        return tail[:cut].strip()

    def exact(row):
        prompt = row["prompt"]
        want = (
            between(prompt, "# Problem Description\n", ["\n# Analysis\n"]),
            between(prompt, "# Analysis\n", ["\n# Others", "<|longctx", "\n# Question\n"]),
            between(prompt, "# Question\n", ["\n# Answer\n"]),
        )
        out = "# Problem Description\n" + row["output"]
        got = []
        for name in ("Problem Description", "Analysis", "Question"):
            pieces = re.split(rf"(?m)^#{{1,3}} ?{name}\b[^\n]*\n?", out, maxsplit=1)
            rest = pieces[1] if len(pieces) == 2 else ""
            got.append(
                re.split(r"(?m)^#{1,3} ?(?:Problem Description|Analysis|Question|Answer)\b", rest)[
                    0
                ].strip()
            )
        return tuple(got) == want

    recited = {
        r["example_id"]: exact(r)
        for r in _rows("length_alone")
        if r["condition"].get("mode") == "recite"
        and r["condition"]["subtask"] == "gsm8k"
        and r["condition"]["filler"] == filler
        and r["condition"]["filler_tokens"] == 16000
    }
    fact = by_id.loc[claim, "facts"]["recited"]
    at_most = 100 * (sum(recited.values()) + len(problems) - len(recited)) / len(problems)
    if set(recited) == problems:
        assert fact == pytest.approx(100 * sum(recited.values()) / len(recited))
    elif at_most < 90.9:  # the stored failures already decide it, whatever the rest recite
        assert fact == pytest.approx(at_most) and by_id.loc[claim, "verdict"] == "premise not met"
    else:
        assert fact != fact and by_id.loc[claim, "verdict"] == "premise not measured"


def test_tag_long_claim_by_needle(by_id):
    """NoLiMa's contains at 2,000 tokens, each question at its rotating depth, averaged per
    needle (a needle's one-hop and two-hop questions share it)."""
    from longctx.chapters import tag_needles as chapter
    from longctx.tasks import tag_needles as tn

    params = scale("tag_needles", "book")
    cases = chapter.design.long_cases(params, tn.haystack_text())
    depth_of = {c.id: params["depths"][i % len(params["depths"])] for i, c in enumerate(cases)}
    rows = [
        r
        for r in _rows("tag_needles")
        if r["condition"]["depth"] == depth_of.get(r["example_id"])
        and r["condition"]["length"] == 2000
        and not r["condition"]["query_aware"]
    ]

    def contains(row):
        return float(any(g in row["output"] for g in row["gold"]))

    def needle(row):
        return row["example_id"].rsplit("/", 1)[0]

    _assert_claim(
        by_id,
        "tag-spacy-long",
        _per_unit(rows, lambda c: c["variant"] == "baseline", contains, needle),
        _per_unit(rows, lambda c: c["variant"] == "td_tc_spacy", contains, needle),
    )
    assert by_id.loc["tag-spacy-long", "n"] == 87


CROSSING_LEVELS = {
    "position": ("first", "middle"),
    "format": ("as is", "C-NORM"),
    "tags": ("none", "spaCy + definitions"),
    "distractors": ("hard", "far"),
    "filler": ("none", "1000 whitespace"),
    "query_aware": ("off", "on"),
}


@pytest.mark.parametrize("factor", list(CROSSING_LEVELS))
def test_crossing_main_effects(by_id, factor):
    """Per question: accuracy over the 16 cells at the high level minus the 16 at the low."""
    params = scale("crossing", "book")
    keep = {q.example_id for q in qa.read_oracle()[: params["num_questions"]]}
    rows = [
        r
        for r in _rows("crossing")
        if r["example_id"] in keep and r["condition"].get("num_documents") == 10
    ]
    low, high = CROSSING_LEVELS[factor]
    _assert_claim(
        by_id,
        f"crossing-{factor}",
        _per_unit(rows, lambda c: c["crossing"][factor] == low, _litm_qa),
        _per_unit(rows, lambda c: c["crossing"][factor] == high, _litm_qa),
    )
    assert by_id.loc[f"crossing-{factor}", "n"] == params["num_questions"]


def test_closed_book_level_over_every_stored_question_and_its_echo_credit():
    """The multi-document page's closed-book level over all stored closed-book rows, and how
    many hits hold a gold answer in the question itself, recounted from the raw rows."""
    from longctx.chapters.multidoc_qa.numbers import closed_book_level

    rows = [r for r in _rows("multidoc_qa") if r["condition"]["setting"] == "closed-book"]
    hits, echo, echo_hits = 0, 0, 0
    for r in rows:
        hit = bool(_litm_qa(r))
        question = _norm(r["prompt"].split("Question: ", 1)[1].split("\nAnswer:", 1)[0])
        inside = any(_norm(g) and _norm(g) in question for g in r["gold"])
        hits += hit
        echo += inside
        echo_hits += hit and inside
    level = closed_book_level(_rows("multidoc_qa"))
    assert len(rows) >= 2500
    assert level["n"] == f"{len(rows):,}" and level["hits"] == f"{hits:,}"
    assert level["level"].startswith(f"{100 * hits / len(rows):.1f} [")
    assert (level["echo_questions"], level["echo_hits"]) == (f"{echo:,}", f"{echo_hits:,}")
