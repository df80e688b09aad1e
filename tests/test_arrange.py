"""The fixes for a lost middle as context orders, on hand-made cases: the random-shuffle
control, the edge reordering, attention sorting and Found in the Middle's calibration."""

import random
from dataclasses import replace

import pytest

from longctx import transforms as T
from longctx.attention import calibrated_relevance, document_mass
from longctx.errors import ParameterError


def _example(n=6, gold_at=2):
    items = tuple(
        T.Item(f"text {i}", title=f"doc {i}", gold=i == gold_at, kind="document") for i in range(n)
    )
    return T.Example("multidoc_qa", "q1", "who?", ("x",), items)


def _titles(example):
    return [it.title for it in example.items]


def test_the_shuffle_control_is_seeded_by_the_example_reproducible_and_keeps_every_item():
    ex = _example(20, gold_at=9)
    once = T.Arrange("shuffle", seed=3).apply(ex)
    again = T.Arrange("shuffle", seed=3).apply(ex)
    assert _titles(once) == _titles(again) and sorted(_titles(once)) == sorted(_titles(ex))
    assert _titles(once) != _titles(ex)  # 20 items: the identity is a 1 in 20! draw
    other_seed = T.Arrange("shuffle", seed=4).apply(ex)
    other_question = T.Arrange("shuffle", seed=3).apply(replace(ex, example_id="q2"))
    assert _titles(other_seed) != _titles(once) != _titles(other_question)
    assert once.settings["arrangement"] == "shuffle"
    # its prompts get their own keys, and say where the gold stood before
    assert T.recorded_fields(once) == {"arrangement": "shuffle", "arranged_from": 9}


def test_edges_put_the_most_relevant_items_at_both_ends_as_langchain_does():
    # LangChain's LongContextReorder on [d1, d2, d3, d4] (best first) gives [d2, d4, d3, d1]
    assert T.edges_order([4.0, 3.0, 2.0, 1.0]) == [1, 3, 2, 0]
    scores = [0.1, 0.9, 0.5, 0.7, 0.3, 0.8]
    arranged = T.Arrange("edges", scores=tuple(scores), label="bm25").apply(_example())
    ranked = [int(t.split()[1]) for t in _titles(arranged)]
    by_score = sorted(range(6), key=lambda i: -scores[i])
    assert {ranked[0], ranked[-1]} == set(by_score[:2])  # the two best at the ends
    assert ranked[2] == by_score[-1] or ranked[3] == by_score[-1]  # the worst in the middle
    assert arranged.settings["arrangement"] == "edges by bm25"


def test_attention_sorting_puts_the_most_attended_document_last_and_keeps_the_set():
    mass = (0.05, 0.10, 0.40, 0.15, 0.20, 0.10)  # the gold (doc 2) draws the most attention
    sorted_once = T.Arrange("ascending", scores=mass, label="attention").apply(_example())
    assert _titles(sorted_once)[-1] == "doc 2" and sorted_once.gold_index == 5
    assert sorted(_titles(sorted_once)) == sorted(_titles(_example()))
    assert _titles(sorted_once)[:2] == ["doc 0", "doc 1"]  # ties keep their order: 1 before 5
    first = T.Arrange("descending", scores=mass, label="attention").apply(_example())
    assert first.gold_index == 0


def test_the_calibration_removes_a_planted_positional_bias_and_finds_the_relevant_document():
    rng = random.Random(7)
    n, relevant = 20, 9  # the relevant document sits in the middle
    bias = [0.30 if k == 0 else 0.20 if k == n - 1 else 0.02 for k in range(n)]  # U-shaped
    noise = [rng.uniform(-0.002, 0.002) for _ in range(n)]
    raw = [bias[k] + noise[k] + (0.05 if k == relevant else 0.0) for k in range(n)]
    assert max(range(n), key=raw.__getitem__) == 0  # raw attention picks the first place
    relevance = calibrated_relevance(raw, bias)
    assert max(range(n), key=relevance.__getitem__) == relevant
    placed = T.Arrange("ascending", scores=tuple(relevance), label="calibrated").apply(
        _example(n, gold_at=relevant)
    )
    assert placed.gold_index == n - 1
    with pytest.raises(ParameterError, match="positional bias for 19 positions"):
        calibrated_relevance(raw, bias[:-1])


def test_a_document_receives_the_attention_of_its_tokens():
    attention = [0.1, 0.2, 0.3, 0.1, 0.05, 0.25]
    assert document_mass(attention, [(0, 2), (2, 5), (5, 6)]) == pytest.approx([0.3, 0.45, 0.25])
    with pytest.raises(ParameterError, match="outside the 6 tokens"):
        document_mass(attention, [(4, 9)])


def test_an_arrangement_without_one_score_per_item_is_refused():
    with pytest.raises(ParameterError, match="3 scores for 6 items"):
        T.Arrange("edges", scores=(1.0, 2.0, 3.0)).apply(_example())
    with pytest.raises(ParameterError, match="unknown arrangement 'middle'"):
        T.Arrange("middle").apply(_example())
    assert T.make("arrange", rule="shuffle", seed=1) == T.Arrange("shuffle", seed=1)


def test_each_document_finds_its_tokens_in_the_rendered_prompt():
    from longctx.attention import char_spans, token_spans

    prompt = "Q: who?\nDocument [1] alpha beta\nDocument [2] gamma\nAnswer:"
    docs = ["Document [1] alpha beta", "Document [2] gamma"]
    spans = char_spans(prompt, docs)
    assert [prompt[a:b] for a, b in spans] == docs
    # words as tokens: (start, end) of each whitespace-separated piece
    offsets, at = [], 0
    for word in prompt.split():
        at = prompt.index(word, at)
        offsets.append((at, at + len(word)))
        at += len(word)
    assert token_spans(offsets, spans) == [(2, 6), (6, 9)]
    with pytest.raises(ParameterError, match="is not in the prompt"):
        char_spans(prompt, ["Document [3]"])


def test_an_arranged_prompt_is_the_baseline_prompt_reordered_with_a_key_of_its_own():
    from longctx.tasks import multidoc_qa as qa
    from longctx.tasks import render

    oracle = qa.read_oracle()
    (ex,) = qa.attach_distractors(oracle[:1], 19, pool=oracle, progress=False)
    (baseline,) = qa.make_requests([ex], 20, [0.5])
    chain = [T.Competitors(19), T.Position(10), T.QueryAware(False)]
    rebuilt = render(T.apply(qa.to_example(ex), chain))
    assert rebuilt == baseline  # the transforms rebuild the multi-document chapter's prompt
    shuffled = render(T.apply(qa.to_example(ex), [*chain, T.Arrange("shuffle", seed=0)]))
    assert shuffled.condition["arrangement"] == "shuffle"
    assert shuffled.condition["arranged_from"] == baseline.condition["gold_index"] == 9
    assert shuffled.prompt != baseline.prompt
    lines = [line for line in shuffled.prompt.splitlines() if line.startswith("Document [")]
    gold = f"(Title: {ex.gold.title}) {ex.gold.text}"
    assert lines[shuffled.condition["gold_index"]].endswith(gold)
    assert sorted(line.split("]", 1)[1] for line in lines) == sorted(
        line.split("]", 1)[1]
        for line in baseline.prompt.splitlines()
        if line.startswith("Document [")
    )
