"""Needle sets, haystacks, TAG prompt variants, metrics and NovelQA (longctx.tasks.tag_needles)."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from longctx.chapters.tag_needles import analysis as tag_needles_analysis
from longctx.errors import DataFileError, ParameterError
from longctx.metrics import extremum_drop_rate, nolima_contains
from longctx.requests import Request, request_key
from longctx.tagging import SpacyTagger, load_categories, strip_tags
from longctx.tasks import get_task
from longctx.tasks import tag_needles as tn

FIXTURES = Path(__file__).parent / "fixtures"


class WordTokenizer:
    """One token per whitespace-separated word: token counts that can be worked out by hand."""

    class _Out:
        def __init__(self, ids):
            self.input_ids = ids

    @staticmethod
    def _words(text):
        return re.findall(r"[^\s<>]+|[<>]", text)  # tag brackets count, so tags add tokens

    def __call__(self, text, add_special_tokens=False):
        if isinstance(text, list):
            return self._Out([self._words(t) for t in text])
        return self._Out(self._words(text))

    def decode(self, ids):
        return " ".join(ids)


HAYSTACK = " ".join(f"Sentence number {i} is about nothing in particular." for i in range(400))


# ---------------------------------------------------------------- metrics


@pytest.mark.parametrize(
    "response, gold, expected",
    [
        ("Yuki", ["Yuki"], 1.0),
        ("The character is Yuki.", ["Yuki"], 1.0),
        ("yuki", ["Yuki"], 0.0),  # case-sensitive, as NoLiMa's evaluator
        ("Stuart", ["Yuki"], 0.0),
        ("", ["Yuki"], 0.0),
        ("Katie or Yuki", ["Megan", "Yuki"], 1.0),
    ],
)
def test_nolima_contains(response, gold, expected):
    assert nolima_contains(response, gold) == expected


def test_extremum_drop_rate_reproduces_table_1():
    # Paper: 59.77 (unrounded inputs)
    assert extremum_drop_rate(81.19, 32.67) == pytest.approx(59.76, abs=0.01)
    assert extremum_drop_rate(94.66, 45.56) == pytest.approx(51.87, abs=0.01)
    assert extremum_drop_rate(87.53, 38.5) == pytest.approx(56.0, abs=0.05)
    assert extremum_drop_rate(50, 60) == pytest.approx(-20.0)
    assert extremum_drop_rate(0, 0) != extremum_drop_rate(0, 0)  # nan


# ---------------------------------------------------------------- needle sets


def test_project_needle_set_is_nolima_style():
    cases = tn.load_cases(avoid_text=tn.haystack_text())
    assert len(cases) >= 30
    hops = pd.Series([c.hop for c in cases]).value_counts().to_dict()
    assert hops == {"onehop": 28, "twohop": 20}
    assert len({c.id for c in cases}) == len(cases)
    for c in cases:
        # The question shares no content word with the needle
        assert tn.literal_overlap(c) == set(), c.id
        assert c.answer in c.needle and c.answer not in c.question
        assert "{" not in c.needle + c.question
    summary = tn.needle_set_summary(cases)
    assert summary["cases"].sum() == len(cases)


def test_nolima_format_fixture_is_read_and_filled():
    cases = tn.load_cases(FIXTURES / "nolima_needle_set.json")
    assert [c.id for c in cases] == [
        "0401/T01_C02/onehop",
        "0401/T01_C02/twohop",
        "0401/T02_C02/onehop",
        "0401/T02_C02/twohop",
        "0502/T01/onehop",
    ]
    first = cases[0]
    assert first.needle == f"Actually, {first.answer} lives next to the Kiasma museum."
    assert first.question == "Which character has been to Helsinki?"
    assert (
        cases[1].question == "Which character has been to Uusimaa?"
        and cases[1].answer == first.answer
    )
    assert cases[3].question == "Which character has been to the state of Saxony?"
    assert cases[4].needle == "There was a vegan guest, named Katie."
    assert (
        first.system_prompt == "You are a helpful assistant."
        and "{haystack}" in first.task_template
    )
    # Seeded: the same seed draws the same characters, names found in the haystack are skipped.
    assert [c.answer for c in tn.load_cases(FIXTURES / "nolima_needle_set.json")] == [
        c.answer for c in cases
    ]
    avoided = tn.load_cases(
        FIXTURES / "nolima_needle_set.json", avoid_text="Gary and Yuki were here"
    )
    assert {c.answer for c in avoided if c.experiment == "0401"} == {"Stuart"}
    with pytest.raises(DataFileError, match="every character name"):
        tn.load_cases(FIXTURES / "nolima_needle_set.json", avoid_text="Katie Gary Yuki Stuart")


def test_needle_set_errors_are_clear(tmp_path):
    with pytest.raises(DataFileError, match="not found"):
        tn.read_needle_set(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataFileError, match="not valid JSON"):
        tn.read_needle_set(bad)
    bad.write_text(json.dumps([{"id": "x", "needle": "{CHAR}"}]))
    with pytest.raises(DataFileError, match="lacks questions, character_set, tests"):
        tn.read_needle_set(bad)
    bad.write_text(
        json.dumps(
            [
                {
                    "id": "x",
                    "needle": "{CHAR} saw {2}.",
                    "questions": {"onehop": "Who?"},
                    "character_set": ["Ann"],
                    "tests": {"t": {"input_args": ["a"]}},
                }
            ]
        )
    )
    with pytest.raises(DataFileError, match=r"placeholder \{2\} but only 1 input_args"):
        tn.load_cases(bad)
    with pytest.raises(ParameterError, match=">= 1"):
        tn.load_cases(n=0)


def test_seeded_subset_of_cases():
    a, b = tn.load_cases(n=10, seed=3), tn.load_cases(n=10, seed=3)
    assert [c.id for c in a] == [c.id for c in b] and len(a) == 10
    assert [c.id for c in tn.load_cases(n=10, seed=4)] != [c.id for c in a]


# ---------------------------------------------------------------- haystack and placement


def test_haystack_text_restores_sentence_boundaries():
    text = tn.haystack_text()
    assert "mistakes.If" not in text and "2012A palliative" not in text
    assert "\n\nIf you had to compress them" in text


@pytest.mark.parametrize("n_tokens", [60, 250, 1000])
def test_haystack_chunks_fill_the_length_with_whole_chunks(n_tokens):
    tok = WordTokenizer()
    chunks = tn.haystack_chunks(tok, n_tokens, max_chars=120, text=HAYSTACK)
    total = len(tok("".join(chunks)).input_ids)
    assert n_tokens - 24 < total <= n_tokens  # whole chunks of 16-24 words
    assert HAYSTACK.startswith("".join(chunks))


def test_haystack_errors():
    with pytest.raises(ParameterError, match=">= 1 token"):
        tn.haystack_chunks(WordTokenizer(), 0, text=HAYSTACK)
    with pytest.raises(ParameterError, match="holds no whole chunk"):
        tn.haystack_chunks(WordTokenizer(), 3, max_chars=500, text=HAYSTACK)


def test_place_needle_at_depths():
    chunks = ["A. ", "B. ", "C. ", "D."]
    assert tn.place_needle(chunks, "N.", 0.0) == (["N. ", "A. ", "B. ", "C. ", "D."], 0)
    assert tn.place_needle(chunks, "N.", 0.5) == (["A. ", "B. ", "N. ", "C. ", "D."], 2)
    placed, at = tn.place_needle(chunks, "N.", 1.0)
    assert at == 4 and "".join(placed) == "A. B. C. D. N."
    with pytest.raises(ParameterError, match="within"):
        tn.place_needle(chunks, "N.", 1.5)


# ---------------------------------------------------------------- requests


def _requests(**kw):
    cases = tn.load_cases(n=5, seed=0)
    args = dict(
        tokenizer=WordTokenizer(),
        lengths=[60, 120],
        variants=["baseline", "td", "td_tc_spacy"],
        taggers=tn.Taggers(spacy=SpacyTagger()),
        text=HAYSTACK,
        max_chars=120,
    )
    args.update(kw)
    return cases, tn.make_requests(cases, **args)


def test_make_requests_builds_the_papers_variants():
    cases, reqs = _requests()
    assert len(reqs) == 5 * 2 * 3
    by = {(r.example_id, r.condition["length"], r.condition["variant"]): r for r in reqs}
    case = cases[0]
    base, td, tc = (by[(case.id, 120, v)] for v in ("baseline", "td", "td_tc_spacy"))
    assert base.system is None
    assert td.system.startswith("You are an AI assistant trained to categorize entities")
    # the control arm: TD's system message without the definitions
    framing = _requests(lengths=[120], variants=["framing"])[1][0]
    assert framing.system.splitlines()[-1] == td.system.splitlines()[-1]
    assert "1." not in framing.system and "1." in td.system
    assert "1. Countries, cities, states: Officially recognized" in td.system
    assert (
        "They will be present within XML tags like <tag> </tag>." in tc.system
        and "18. numbers" in tc.system
    )
    assert base.prompt == td.prompt  # TD changes only the system prompt
    assert case.needle in base.prompt and f"Question: {case.question}" in base.prompt
    assert base.prompt.startswith("You will answer a question based on the following book snippet:")
    assert (
        tc.prompt != base.prompt
        and strip_tags(tc.prompt, load_categories("spacy").tags) == base.prompt
    )
    assert tc.meta["tag_tokens"] > 0 and base.meta["tag_tokens"] == 0
    assert tc.condition["tagger"].startswith("spacy:") and base.condition["tagger"] == "none"
    assert base.gold == (case.answer,) and base.stop.newline
    # Rotating depths: case i at depths[i % 5], the same at every length and variant.
    assert [by[(c.id, 60, "baseline")].condition["depth"] for c in cases] == list(tn.DEFAULT_DEPTHS)


def test_depth_mode_all_and_query_aware_requests():
    cases, reqs = _requests(
        variants=["baseline"],
        depth_mode="all",
        depths=[0.0, 1.0],
        query_aware_variants=["baseline"],
        query_aware_lengths=[120],
    )
    assert len(reqs) == 5 * 2 * 2 + 5 * 2
    qac = [r for r in reqs if r.condition["query_aware"]]
    assert {r.condition["length"] for r in qac} == {120}
    r = qac[0]
    assert r.prompt.count(f"Question: {cases[0].question}") == 2
    assert r.prompt.index("Question:") < r.prompt.index(
        cases[0].needle if r.example_id == cases[0].id else "Sentence"
    )


def test_unknown_variant_or_missing_tagger_fails():
    with pytest.raises(ParameterError, match="unknown TAG variant"):
        _requests(variants=["tags_everywhere"])
    with pytest.raises(ParameterError, match="needs the llm tagger"):
        _requests(variants=["td_tc_llm"])
    with pytest.raises(ParameterError, match="depth_mode"):
        _requests(depth_mode="random")


def test_needle_sets_own_template_and_system_prompt_are_used():
    cases = tn.load_cases(FIXTURES / "nolima_needle_set.json")
    reqs = tn.make_requests(
        cases[:1],
        tokenizer=WordTokenizer(),
        lengths=[60],
        variants=["baseline", "td"],
        text=HAYSTACK,
        max_chars=120,
    )
    assert all(
        r.prompt.startswith("Snippet:\n") and r.system == "You are a helpful assistant."
        for r in reqs
    )


def test_system_prompt_is_part_of_the_request_key_and_old_keys_stay():
    a = Request("t", "e", "prompt", ("x",))
    b = Request("t", "e", "prompt", ("x",), system="sys")
    assert request_key("fp", a, "auto") != request_key("fp", b, "auto")
    # Requests without a system prompt keep the key they had before system prompts existed.
    import hashlib
    from dataclasses import asdict

    old = json.dumps(
        ["fp", "t", {}, "e", "prompt", "auto", {"max_new_tokens": 64, "stop": asdict(a.stop)}],
        sort_keys=True,
        ensure_ascii=False,
    )
    assert request_key("fp", a, "auto") == hashlib.sha256(old.encode()).hexdigest()


def test_task_is_registered():
    assert get_task("tag_needles") is tn


# ---------------------------------------------------------------- tables


def _scored():
    rows = []
    # 4 cases; baseline: 4/4 at 250, 1/4 at 1000; td: 4/4 and 2/4.
    for variant, long_correct in (("baseline", [1, 0, 0, 0]), ("td", [1, 1, 0, 0])):
        for k in range(4):
            rows.append(
                {
                    "variant": variant,
                    "length": 250,
                    "depth": 0.5,
                    "example_id": f"c{k}",
                    "correct": 1.0,
                    "model": "m",
                    "tag_tokens": 0,
                    "context_tokens": 250,
                }
            )
            rows.append(
                {
                    "variant": variant,
                    "length": 1000,
                    "depth": 0.5,
                    "example_id": f"c{k}",
                    "correct": float(long_correct[k]),
                    "model": "m",
                    "tag_tokens": 10 * (variant == "td"),
                    "context_tokens": 1000,
                }
            )
    return pd.DataFrame(rows)


def test_drop_rates_and_intervals():
    drops = tag_needles_analysis.drop_rates(_scored()).set_index("variant")
    assert drops.loc["baseline", "drop_rate"] == pytest.approx(75.0)
    assert drops.loc["td", "drop_rate"] == pytest.approx(50.0)
    assert drops.loc["td", "ci_low"] <= 50.0 <= drops.loc["td", "ci_high"]
    assert drops.loc["baseline", "n"] == 4


def test_versus_baseline_and_overhead():
    gains = tag_needles_analysis.versus_baseline(_scored()).set_index(["length", "variant"])
    assert gains.loc[(250, "td"), "change"] == pytest.approx(0.0)
    assert gains.loc[(1000, "td"), "change"] == pytest.approx(25.0)
    over = tag_needles_analysis.overhead_vs_gain(_scored()).set_index(["variant", "length"])
    # 10 tag tokens in a 1,000-token context: a share of 0.01 (1%), not 1 (the table once showed 100x)
    assert over.loc[("td", 1000), "tag_tokens"] == 10 and over.loc[
        ("td", 1000), "tag_share"
    ] == pytest.approx(0.01)


def test_score_rows_uses_contains():
    row = {
        "condition": {
            "variant": "td",
            "length": 250,
            "depth": 0.0,
            "query_aware": False,
            "hop": "onehop",
            "tagger": "none",
        },
        "key": "k0",
        "model": "m",
        "example_id": "W01/T01/onehop",
        "output": "It is Yuki.",
        "gold": ["Yuki"],
        "prompt_tokens": 300,
        "meta": {"context_tokens": 250, "tag_tokens": 0},
        "longctx_version": "0",
        "params": {"device": "cpu", "dtype": "float32"},
        "seconds_per_prompt": 1.0,
    }
    scored = tn.score_rows([row, {**row, "output": "yuki"}])
    assert [s["correct"] for s in scored] == [1.0, 0.0] and scored[0]["variant_label"] == "TD"


# ---------------------------------------------------------------- NovelQA


def test_read_novelqa_fixture():
    questions, books = tn.read_novelqa(FIXTURES / "novelqa")
    assert [q.id for q in questions] == ["Q0001", "Q0002", "Q0003"]
    assert [q.complexity for q in questions] == ["single-hop", "multi-hop", "detail"]
    assert questions[1].options == ("Lisbon", "Gull Point", "Harlow", "The harbour")
    assert [q.answer for q in questions] == ["B", "C", ""]
    assert books["B00"][0] == "The Lighthouse Keeper" and "Gull Point" in books["B00"][1]


def test_novelqa_requests_and_scoring():
    questions, books = tn.read_novelqa(FIXTURES / "novelqa")
    reqs = tn.novelqa_requests(
        questions,
        books,
        tokenizer=WordTokenizer(),
        variants=["baseline", "td_tc_spacy"],
        max_book_tokens=30,
        taggers=tn.Taggers(spacy=SpacyTagger()),
    )
    assert len(reqs) == 4  # the question without a released answer is skipped
    base = reqs[0]
    assert (
        "Book title: The Lighthouse Keeper;" in base.prompt
        and "Choices: A: Tom B: Elsie Marrow" in base.prompt
    )
    assert "Chapter Three" not in base.prompt  # truncated to 30 words, at a sentence end
    assert "<person>" in reqs[1].prompt
    rows = [
        {
            "condition": r.condition,
            "model": "m",
            "example_id": r.example_id,
            "output": out,
            "gold": list(r.gold),
        }
        for r, out in zip(reqs, ["B", "<B>", "Answer: C", "D"])
    ]
    assert [s["correct"] for s in tn.score_novelqa(rows)] == [1.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize(
    "output, expected",
    [("B", "B"), ("<C>", "C"), ("Answer: D", "D"), ("A: Tom", "A"), ("none of them", None)],
)
def test_parse_choice(output, expected):
    assert tn.parse_choice(output) == expected


def test_novelqa_layout_errors(tmp_path):
    with pytest.raises(DataFileError, match="NovelQA layout"):
        tn.read_novelqa(tmp_path)
    (tmp_path / "Data" / "X").mkdir(parents=True)
    (tmp_path / "Data" / "X" / "B01.json").write_text("[]")
    with pytest.raises(DataFileError, match="B01.txt is missing"):
        tn.read_novelqa(tmp_path)
    (tmp_path / "Books" / "X").mkdir(parents=True)
    (tmp_path / "Books" / "X" / "B01.txt").write_text("text")
    (tmp_path / "Data" / "X" / "B01.json").write_text(
        json.dumps([{"Question": "q", "Options": ["a", "b"]}])
    )
    with pytest.raises(DataFileError, match="expected 4 options"):
        tn.read_novelqa(tmp_path)


@pytest.mark.model
def test_system_prompt_reaches_the_chat_template(smollm2):
    rendered = smollm2.render("Question?", system="You tag entities.")
    assert "You tag entities." in rendered and rendered.index("You tag entities.") < rendered.index(
        "Question?"
    )
    assert "You tag entities." not in smollm2.render("Question?")


def test_short_comparisons_ask_the_headline_cases_at_their_headline_depths():
    """The paper's 250-token comparisons on every headline case: same cases and rotating
    depths as the headline pair, three variants, and sized_depths names those depths."""
    from longctx.chapters import scale
    from longctx.chapters import tag_needles as chapter

    params = {
        **scale("tag_needles", "book"),
        "long_length": 200,
        "short_length": 100,
        "long_num_cases": 3,
    }
    taggers = tn.Taggers(spacy=SpacyTagger())
    long = chapter.design.long_requests(
        params, tokenizer=WordTokenizer(), taggers=taggers, text=HAYSTACK
    )
    short = chapter.design.short_requests(
        params, tokenizer=WordTokenizer(), taggers=taggers, text=HAYSTACK
    )
    assert len(short) == 6 * 5 and {r.condition["variant"] for r in short} == {
        "baseline",
        "framing",
        "td",
        "td_tc_spacy",
        "td_tc_system",
    }
    assert {r.condition["length"] for r in short} == {100} and not any(
        r.condition["query_aware"] for r in short
    )
    depth_of = chapter.numbers.sized_depths(params, HAYSTACK)
    assert list(depth_of) == [c.id for c in chapter.design.long_cases(params, HAYSTACK)]
    assert all(depth_of[r.example_id] == r.condition["depth"] for r in [*long, *short])
    assert sorted(set(depth_of.values())) == params["depths"]  # six cases over five depths
    assert (
        chapter.design.short_requests(
            {**params, "short_length": None},
            tokenizer=WordTokenizer(),
            taggers=taggers,
            text=HAYSTACK,
        )
        == []
    )


def test_plan_asks_a_grid_prompt_that_is_also_a_sized_one_once(monkeypatch):
    """A grid case at the short length whose rotating depth matches its sized depth is the
    same prompt: the plan lists it in the sized block only."""
    from longctx.chapters import scale
    from longctx.chapters import tag_needles as chapter
    from longctx.requests import dedupe_key

    params = {
        **scale("tag_needles", "book"),
        "long_length": 200,
        "short_length": 100,
        "long_num_cases": 2,
        "lengths": [100, 150],
        "variants": ["baseline", "td"],
        "query_aware_variants": [],
        "long_needle_sets": ["longctx"],
    }
    sized_cases = chapter.design.long_cases(params, HAYSTACK)
    other = next(
        c
        for c in tn.load_cases("longctx", avoid_text=HAYSTACK)
        if c.id not in {s.id for s in sized_cases}
    )
    # The grid's first two cases are the sized ones in the same order, so at the same rotating depths.
    monkeypatch.setattr(
        chapter.design, "cases_for", lambda params: (HAYSTACK, [*sized_cases, other])
    )
    monkeypatch.setattr(
        chapter.design, "taggers_for", lambda *a, **k: tn.Taggers(spacy=SpacyTagger())
    )
    blocks = chapter.design.blocks(params, WordTokenizer(), Path("unused"))
    keys = [dedupe_key(r) for b in blocks for r in b.requests]
    assert len(keys) == len(set(keys))
    short = blocks[1].requests
    assert (
        blocks[1].headline
        and {r.condition["length"] for r in short} == {100}
        and len(short) == 2 * len(params["short_variants"])
    )
    grid_short = [r for b in blocks[2:] for r in b.requests if r.condition["length"] == 100]
    assert {r.example_id for r in grid_short} == {other.id} and len(grid_short) == 2
    assert len([r for b in blocks[2:] for r in b.requests if r.condition["length"] == 150]) == 3 * 2


def test_extra_needle_set_adds_cases_without_literal_overlap_or_id_clashes():
    from longctx.tasks import tag_needles as tn

    base = tn.load_cases("longctx")
    extra = tn.load_cases("longctx-extra")
    assert len(base) == 48 and len(extra) == 106
    assert not {c.id for c in base} & {c.id for c in extra}
    assert not [c.id for c in extra if tn.literal_overlap(c)]
    assert {c.hop for c in extra} == {"onehop", "twohop"}


def test_long_headline_asks_every_case_of_both_sets_in_two_variants():
    from longctx.chapters import scale
    from longctx.chapters import tag_needles as chapter

    params = {**scale("tag_needles", "book"), "long_length": 120, "long_num_cases": 3}
    cases = chapter.design.long_cases(params, HAYSTACK)
    assert len(cases) == 6 and len({c.id for c in cases}) == 6
    assert {c.id for c in cases[:3]} <= {c.id for c in tn.load_cases("longctx")}
    reqs = chapter.design.long_requests(
        params, tokenizer=WordTokenizer(), taggers=tn.Taggers(spacy=SpacyTagger()), text=HAYSTACK
    )
    assert len(reqs) == 6 * 3
    assert {r.condition["variant"] for r in reqs} == {"baseline", "td_tc_spacy", "td_tc_system"}
    assert {r.condition["length"] for r in reqs} == {120} and not any(
        r.condition["query_aware"] for r in reqs
    )
    # Each case keeps one rotating depth in both variants (the comparison is paired).
    depth = {}
    for r in reqs:
        assert depth.setdefault(r.example_id, r.condition["depth"]) == r.condition["depth"]
    assert (
        chapter.design.long_requests(
            {**params, "long_length": None},
            tokenizer=WordTokenizer(),
            taggers=tn.Taggers(),
            text=HAYSTACK,
        )
        == []
    )
    clash = {**params, "long_needle_sets": ["longctx", "longctx"]}
    with pytest.raises(ParameterError, match="share case ids"):
        chapter.design.long_cases(clash, HAYSTACK)
