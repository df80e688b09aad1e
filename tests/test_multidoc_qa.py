import gzip
import json

import pytest

from longctx.errors import DataFileError, ParameterError
from longctx.metrics import qa_accuracy
from longctx.tasks import get_task
from longctx.tasks import multidoc_qa as qa

INSTRUCTION = (
    "Write a high-quality answer for the given question using only "
    "the provided search results (some of which might be irrelevant)."
)
DOCS = [
    qa.Document("first doc", "first doc text"),
    qa.Document("second doc", "second doc text", hasanswer=True),
]
FORMATTED = (
    "Document [1](Title: first doc) first doc text\nDocument [2](Title: second doc) second doc text"
)


# --- prompts: character for character the strings of the paper's own tests -------------


def test_qa_prompt_is_the_papers():
    assert (
        qa.build_prompt("test question", DOCS)
        == f"{INSTRUCTION}\n\n{FORMATTED}\n\nQuestion: test question\nAnswer:"
    )


def test_random_ordering_prompt_is_the_papers():
    assert (
        qa.build_prompt("test question", DOCS, mention_random_ordering=True)
        == f"{INSTRUCTION} The search results are ordered randomly.\n\n{FORMATTED}\n\nQuestion: test question\nAnswer:"
    )


def test_query_aware_prompt_is_the_papers():
    assert qa.build_prompt("test question", DOCS, query_aware=True) == (
        f"{INSTRUCTION}\n\nQuestion: test question\n\n{FORMATTED}\n\nQuestion: test question\nAnswer:"
    )
    with pytest.raises(ParameterError):
        qa.build_prompt("q", DOCS, query_aware=True, mention_random_ordering=True)


def test_closed_book_prompt_is_the_papers():
    assert qa.build_prompt("test question", []) == "Question: test question\nAnswer:"


# --- metric: hand-worked cases -----------------------------------------------------------


@pytest.mark.parametrize(
    "response, answers, expected",
    [
        ("Wilhelm Conrad Röntgen", ["Wilhelm Conrad Röntgen"], 1.0),
        # substring after normalizing
        ("It was Wilhelm Conrad Röntgen, in 1901.", ["Wilhelm Conrad Röntgen"], 1.0),
        # no accent folding, as in the paper
        ("Wilhelm Conrad Rontgen", ["Wilhelm Conrad Röntgen"], 0.0),
        ("beatles", ["The Beatles"], 1.0),  # articles dropped from the gold answer too
        ("St Louis, Missouri", ["St. Louis"], 1.0),  # punctuation dropped
        ("“Paris”", ["Paris"], 1.0),  # curly quotes are kept, but the word is still a substring
        ("I am not sure.\nParis", ["Paris"], 0.0),  # only the first line counts
        ("  Paris  \nLondon", ["London", "Paris"], 1.0),  # any gold answer
        ("", ["Paris"], 0.0),
    ],
)
def test_qa_accuracy_hand_worked(response, answers, expected):
    assert qa_accuracy(response, answers) == expected


def test_score_reads_output_and_gold():
    assert qa.score({"output": "The answer is 42", "gold": ["42"]}) == 1.0


# --- the release format ------------------------------------------------------------------


def _ctx(title, text, gold=False, **extra):
    return {
        "id": f"id-{title}",
        "title": title,
        "text": text,
        "hasanswer": gold,
        "isgold": gold,
        **extra,
    }


def _write_fixture(path, gold_at=2):
    records = []
    for n in range(3):
        ctxs = [
            _ctx(f"d{n}-{i}", f"distractor {i} of question {n}", score=1.0 - i / 10)
            for i in range(3)
        ]
        ctxs.insert(gold_at, _ctx(f"g{n}", f"the answer is answer{n}", gold=True))
        records.append({"question": f"question {n}?", "answers": [f"answer{n}"], "ctxs": ctxs})
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return records


def test_release_reader_gives_back_the_files_inputs(tmp_path):
    path = tmp_path / qa.release_filename(4, 2)
    assert path.name == "nq-open-4_total_documents_gold_at_2.jsonl.gz"
    records = _write_fixture(path, gold_at=2)
    examples = qa.read_release_file(path)
    assert [e.example_id for e in examples] == ["nq-0000", "nq-0001", "nq-0002"]
    ex = examples[1]
    assert ex.question == "question 1?" and ex.answers == ("answer1",) and ex.gold.isgold
    # Same docs, same order, same fields
    assert [d.to_dict() for d in ex.documents(4, 2)] == records[1]["ctxs"]
    moved = ex.documents(4, 0)
    assert moved[0] == ex.gold and moved[1:] == list(ex.distractors)
    assert qa.read_release_file(path, limit=1)[0].question == "question 0?"


def test_release_reader_errors_are_clear(tmp_path):
    with pytest.raises(DataFileError, match="does not exist"):
        qa.read_release_file(tmp_path / "missing.jsonl.gz")
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"not gzip at all")
    with pytest.raises(DataFileError, match="not a readable JSONL"):
        qa.read_release_file(bad)
    nogold = tmp_path / "nogold.jsonl"
    nogold.write_text(
        json.dumps({"question": "q", "answers": ["a"], "ctxs": [_ctx("t", "x")]}) + "\n"
    )
    with pytest.raises(DataFileError, match="line 1: .*isgold"):
        qa.read_release_file(nogold)


def test_documents_checks_its_arguments():
    ex = qa.QAExample("e", "q", ("a",), qa.Document("g", "a"), (qa.Document("d", "x"),))
    with pytest.raises(ParameterError, match="attach more"):
        ex.documents(3, 0)
    with pytest.raises(ParameterError):
        ex.documents(2, 2)


# --- distractors -------------------------------------------------------------------------


def _pool():
    rows = [
        (
            "who won the first nobel prize in physics",
            "Röntgen",
            "Nobel physics",
            "Röntgen won the first Nobel prize in physics",
        ),
        ("what is the capital of france", "Paris", "France", "Paris is the capital of France"),
        (
            "who painted the mona lisa",
            "Leonardo da Vinci",
            "Mona Lisa",
            "The Mona Lisa was painted by Leonardo da Vinci",
        ),
        (
            "when was the nobel prize first awarded",
            "1901",
            "Nobel Prize",
            "The Nobel Prize was first awarded in 1901",
        ),
        (
            "what river runs through paris",
            "Seine",
            "Seine",
            "The Seine runs through Paris and Rouen",
        ),
        (
            "who founded the nobel foundation",
            "Alfred Nobel",
            "Nobel Foundation",
            "A foundation for prizes in physics and peace",
        ),
    ]
    return [
        qa.QAExample(f"nq-{i:04d}", q, (a,), qa.Document(t, x, True, True))
        for i, (q, a, t, x) in enumerate(rows)
    ]


def test_bm25_distractors_rank_by_relevance_and_never_hold_an_answer():
    pool = _pool()
    (ex,) = qa.attach_distractors(pool[:1], 3, kind="bm25", pool=pool)
    titles = [d.title for d in ex.distractors]
    assert "Nobel physics" not in titles  # its own gold chunk
    # "Nobel Prize" shares nobel (x2), prize (x2) and first with the question; "Nobel Foundation"
    # only nobel and physics ("prizes" is another token: no stemming)
    assert titles[:2] == ["Nobel Prize", "Nobel Foundation"]
    assert all("röntgen" not in (d.title + d.text).lower() for d in ex.distractors)
    assert not any(d.hasanswer or d.isgold for d in ex.distractors)
    assert ex.source == "oracle+bm25"
    # an answer-bearing chunk is excluded even when BM25 likes it: "Seine" chunk mentions Paris
    (fr,) = qa.attach_distractors(pool[1:2], 4, pool=pool)
    assert "Seine" not in [d.title for d in fr.distractors]
    assert qa.attach_distractors(pool[:1], 3, pool=pool) == [ex]  # deterministic


def test_a_one_letter_answer_falls_back_to_whole_word_matching_for_that_example_only():
    # NQ-Open nq-1840 asks which letter the Atlantic is shaped like ("S"): as a substring, "s"
    # is in every chunk, so no distractor would be eligible.
    pool = _pool()
    letter = qa.QAExample(
        "nq-0100",
        "atlantic ocean shape is similar to which english letter",
        ("S",),
        qa.Document("Atlantic", "The Atlantic has the shape of an S"),
    )
    with_s = qa.QAExample(
        "nq-0101", "q", ("x",), qa.Document("Letters", "The letter S in the alphabet")
    )
    (ex,) = qa.attach_distractors([letter], 4, pool=[letter, with_s, *pool])
    titles = [d.title for d in ex.distractors]
    # "S" as a word: excluded
    assert len(titles) == 4 and "Letters" not in titles and "Atlantic" not in titles
    # "Nobel Foundation" ("prizes") holds the letter only inside words, which whole-word matching allows
    assert qa._contains_answer(pool[5].gold, ["s"]) and not qa._contains_answer(
        pool[5].gold, ["s"], whole_words=True
    )
    # An example with enough candidates keeps the substring rule: "Parisian" holds "paris" as a
    # substring only, and is still excluded.
    cafes = qa.QAExample(
        "nq-0102", "q", ("y",), qa.Document("Cafes", "Parisian cafes of the capital of France")
    )
    (fr,) = qa.attach_distractors(pool[1:2], 3, pool=[*pool, cafes])
    assert "Cafes" not in [d.title for d in fr.distractors]


def test_random_distractors_are_seeded():
    pool = _pool()
    a = qa.attach_distractors(pool, 2, kind="random", seed=1, pool=pool)
    assert a == qa.attach_distractors(pool, 2, kind="random", seed=1, pool=pool)
    assert a != qa.attach_distractors(pool, 2, kind="random", seed=2, pool=pool)
    assert all(len(e.distractors) == 2 for e in a)


def test_distractor_errors():
    pool = _pool()
    with pytest.raises(ParameterError, match="unknown distractor kind"):
        qa.attach_distractors(pool, 2, kind="contriever")
    with pytest.raises(ParameterError, match="larger pool"):
        qa.attach_distractors(pool[:1], 6, pool=pool)  # only 5 other chunks exist


def test_shuffle_distractors_is_a_seeded_permutation():
    (ex,) = qa.attach_distractors(_pool()[:1], 4, kind="random", pool=_pool())
    shuffled = qa.shuffle_distractors(ex, seed=3)
    assert sorted(d.title for d in shuffled.distractors) == sorted(d.title for d in ex.distractors)
    assert shuffled == qa.shuffle_distractors(ex, seed=3)


def test_written_files_are_byte_for_byte_reproducible_and_readable(tmp_path):
    pool = _pool()
    first = qa.attach_distractors(pool[:2], 3, pool=pool)
    sha_a = qa.write_release_file(first, 4, 1, tmp_path / "a.jsonl.gz")
    sha_b = qa.write_release_file(
        qa.attach_distractors(pool[:2], 3, pool=pool), 4, 1, tmp_path / "b.jsonl.gz"
    )
    assert (
        sha_a == sha_b
        and (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    )
    back = qa.read_release_file(tmp_path / "a.jsonl.gz")
    assert [e.example_id for e in back] == ["nq-0000", "nq-0001"]
    assert back[0].documents(4, 1) == first[0].documents(4, 1)


# --- requests ----------------------------------------------------------------------------


def test_make_requests_moves_the_gold_document():
    pool = _pool()
    exs = qa.attach_distractors(pool[:2], 4, pool=pool)
    reqs = qa.make_requests(exs, 5, [0.0, 0.5, 1.0], query_aware=True)
    assert len(reqs) == 6
    assert [r.condition["gold_index"] for r in reqs[:3]] == [0, 2, 4]
    r = reqs[1]
    lines = [line for line in r.prompt.split("\n") if line.startswith("Document [")]
    assert len(lines) == 5 and lines[2].startswith(f"Document [3](Title: {exs[0].gold.title})")
    assert r.prompt.count("Question: ") == 2 and r.gold == exs[0].answers
    assert r.stop.cut("Röntgen\nMore text") == ("Röntgen", True)
    assert get_task("multidoc_qa") is qa


def test_baseline_requests_are_closed_book_and_oracle():
    ex = _pool()[0]
    closed, oracle = qa.make_baseline_requests([ex])
    assert closed.condition["setting"] == "closed-book" and "Document [" not in closed.prompt
    assert oracle.condition["setting"] == "oracle" and oracle.prompt.count("Document [") == 1
    assert ex.gold.text in oracle.prompt


# --- the real oracle file (mirror) -------------------------------------------------------


def test_oracle_reconstruction_is_deterministic(public_data, tmp_path):
    oracle = qa.read_oracle()
    assert len(oracle) == 2655
    assert oracle[0].question == "who got the first nobel prize in physics"
    assert oracle[0].answers == ("Wilhelm Conrad Röntgen",)
    shas = [
        qa.write_release_file(
            qa.attach_distractors(oracle[:3], 9, pool=oracle), 10, 4, tmp_path / f"run{i}.jsonl.gz"
        )
        for i in range(2)
    ]
    assert shas[0] == shas[1]
    for ex in qa.read_release_file(tmp_path / "run0.jsonl.gz"):
        answers = [a.lower() for a in ex.answers]
        assert len(ex.distractors) == 9
        assert not any(
            a in (d.title + " " + d.text).lower() for a in answers for d in ex.distractors
        )


def test_positions_match_the_papers_indices():
    assert qa.position_indices(10, [0.0, 0.5, 1.0]) == [0, 4, 9]
    assert qa.position_indices(20, [0.0, 0.5, 1.0]) == [0, 9, 19]
    assert qa.position_indices(30, [1, 5, 10, 15, 20, 25, 30]) == [0, 4, 9, 14, 19, 24, 29]
    for bad in ([0], [1.5], [True], [31]):
        with pytest.raises(ParameterError):
            qa.position_indices(30, bad)
