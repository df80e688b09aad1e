"""longctx.transforms: each manipulation on hand-made examples, and every committed row of
the chapters built on documents and key-value pairs rebuilt through the interface with the
same store key (so moving a chapter onto transforms regenerates nothing)."""

from pathlib import Path

import pytest

from longctx import transforms as T
from longctx.chapters import scale
from longctx.chapters.kv_retrieval.design import examples_for as kv_examples_for
from longctx.errors import ParameterError
from longctx.requests import request_key
from longctx.store import ResultsStore
from longctx.tasks import kv_retrieval as kv
from longctx.tasks import multidoc_qa as qa
from longctx.tasks import render

ROOT = Path(__file__).resolve().parents[1]


def doc(i, gold=False):
    return T.Item(f"Text {i}. Second sentence {i}. Third one {i}.", f"Title {i}", gold)


def example(n=6):
    return T.Example(
        "multidoc_qa",
        "q1",
        "who?",
        ("ans",),
        (doc(0, True),),
        tuple(doc(i) for i in range(1, n + 1)),
        "bm25",
        {"source": "oracle+bm25"},
    )


def test_competitors_hard_far_random_are_distinct_seeded_and_sized():
    ex = example(10)
    hard = T.Competitors(3).apply(ex)
    assert [it.title for it in hard.items] == ["Title 0", "Title 1", "Title 2", "Title 3"]
    far = T.Competitors(3, "far", far_from=0.5, seed=1).apply(ex)
    assert len(far.items) == 4 and all(int(it.title.split()[1]) >= 6 for it in far.items[1:])
    assert far == T.Competitors(3, "far", far_from=0.5, seed=1).apply(ex)  # deterministic
    assert far != T.Competitors(3, "far", far_from=0.5, seed=2).apply(ex)
    with pytest.raises(ParameterError, match="5 far candidates .* 6 requested"):
        T.Competitors(6, "far").apply(ex)
    with pytest.raises(ParameterError, match="hard, far or random"):
        T.Competitors(2, "near").apply(ex)


def test_position_conventions_follow_each_papers_code():
    ex = T.Competitors(9).apply(example(9))  # 10 documents
    assert T.Position(0.5).apply(ex).gold_index == 4  # LitM: floor, middle of 10 is index 4
    assert T.Position(0.75).apply(ex).gold_index == 6
    assert T.Position(0.75, rounding="nearest").apply(ex).gold_index == 7
    assert T.Position(10).apply(ex).gold_index == 9
    moved = T.Position(3).apply(ex)
    assert [it.title for it in moved.items if not it.gold] == [
        it.title for it in ex.items if not it.gold
    ]
    with pytest.raises(ParameterError, match="position 11 outside 1..10"):
        T.Position(11).apply(ex)


def test_normalize_changes_only_passage_text_and_is_seeded():
    ex = T.Competitors(3).apply(example())
    norm = T.Normalize(":", ratio=1.0, seed=0).apply(ex)
    assert all(":" in it.text and it.title == o.title for it, o in zip(norm.items, ex.items))
    assert norm.question == ex.question and norm.answers == ex.answers
    assert T.Normalize("none").apply(ex).items == ex.items
    assert (
        norm.settings["method"] == "C-NORM"
        and T.Normalize("none").apply(ex).settings["method"] == "baseline"
    )


def test_compose_render_and_new_fields_only_when_used():
    chain = [T.Competitors(3), T.Position(0.5), T.QueryAware()]
    req = render(T.apply(example(), chain))
    assert req.condition == {
        "setting": "documents",
        "num_documents": 4,
        "gold_index": 1,
        "query_aware": True,
        "random_order": False,
        "distractors": "bm25",
        "source": "oracle+bm25",
    }
    assert req.prompt.count("who?") == 2  # query-aware: before and after the documents
    padded = render(T.apply(example(), [*chain, T.Padding("whitespace", 500)]))
    assert (
        padded.condition["filler_tokens"] == 500
        and "<|longctx_filler:whitespace:500|>" in padded.prompt
    )
    at = padded.prompt.index("<|longctx_filler")
    assert padded.prompt.rfind("Document [4]") < at < padded.prompt.rfind("Question")
    before = render(T.apply(example(), [*chain, T.Padding("essay", 100, "before")]))
    assert before.prompt.index("<|longctx_filler:essay:100|>") < before.prompt.index("Document [1]")
    far = render(T.apply(example(), [T.Competitors(2, "far"), T.Position(1)]))
    assert far.condition["competitors"] == "far" and far.condition["far_from"] == 0.5
    assert render(T.apply(example(), [T.Competitors(0)])).condition["setting"] == "oracle"
    assert render(T.apply(example(), [T.ClosedBook()])).condition["setting"] == "closed-book"


def test_tags_wrap_chunks_and_definitions_go_to_the_system_prompt():
    ex = T.Example(
        "multidoc_qa",
        "q1",
        "who?",
        ("ans",),
        (T.Item("Barack Obama visited Paris in 2009.", "Visit", True),),
        (T.Item("The weather was mild that year.", "Weather"),),
        "bm25",
        {"source": "oracle+bm25"},
    )
    tagged = T.apply(ex, [T.Competitors(1), T.Tags("spacy", definitions=True)])
    assert "<" in tagged.items[0].text and "Barack Obama" in tagged.items[0].text
    assert tagged.items[0].text.replace("<", "").count("Obama") == 1
    req = render(tagged)
    assert (
        req.condition["tags"] == "spacy+definitions"
        and req.system
        and "person" in req.system.lower()
    )
    bare = render(T.apply(ex, [T.Competitors(1), T.Tags("spacy", definitions=False)]))
    assert (
        bare.system is None
        and bare.condition["tags"] == "spacy"
        and bare.prompt != render(T.apply(ex, [T.Competitors(1)])).prompt
    )


def test_make_declares_parameters_and_rejects_unknown_ones():
    assert T.make("position", at=0.5) == T.Position(0.5)
    assert T.Competitors.parameters() == {
        "count": ...,
        "kind": "hard",
        "far_from": 0.5,
        "min_rank": 0,
        "seed": 0,
    }
    with pytest.raises(ParameterError, match="unknown transform 'pad'"):
        T.make("pad")
    with pytest.raises(ParameterError, match="no parameter \\['depth'\\]"):
        T.make("position", depth=0.5)


# ---------------------------------------------------------------------------------------------
# Committed rows, rebuilt


def committed(experiment):
    root = ROOT / "data" / "results"
    for folder in ResultsStore.folders(root, experiment):
        yield from ResultsStore(root, folder, experiment).rows()


def key_of(row, request):
    identity = row.get("backend") or "hf"
    fp = row["model_fingerprint"] if identity == "hf" else f"{row['model_fingerprint']}+{identity}"
    return request_key(fp, request, row.get("prompt_mode", "auto"))


def test_every_committed_document_row_is_rebuilt_with_its_key():
    rows = [*committed("multidoc_qa"), *committed("cnorm_qa")]
    oracle = qa.read_oracle()
    raw = {e.example_id: e for e in oracle}
    ids = sorted({r["example_id"] for r in rows})
    attached = {
        e.example_id: e for e in qa.attach_distractors([raw[i] for i in ids], 29, pool=oracle)
    }
    checked = 0
    for row in rows:
        c = row["condition"]
        if c["setting"] == "closed-book":
            ex, chain = qa.to_example(raw[row["example_id"]]), [T.ClosedBook()]
        elif c["setting"] == "oracle":
            ex, chain = qa.to_example(raw[row["example_id"]]), [T.Competitors(0)]
        else:
            ex = qa.to_example(attached[row["example_id"]])
            chain = [T.Competitors(c["num_documents"] - 1)]
            if "method" in c:  # the C-NORM chapter: permuted order, then the format
                chain += [
                    T.Shuffle(c["seed"]),
                    T.Normalize(
                        c["delimiter"], c["ratio"] or 0.5, seed=c["seed"], label=c["method"]
                    ),
                ]
            chain += [T.Position(c["gold_index"] + 1), T.QueryAware(c["query_aware"])]
        assert key_of(row, render(T.apply(ex, chain))) == row["key"], (row["example_id"], c)
        checked += 1
    assert checked == len(rows) > 1000


def test_every_committed_key_value_row_is_rebuilt_with_its_key():
    # The store holds the book scale's records and the paper scale's (a GPU run's), and may
    # hold release records beyond either (an extension in progress): rebuild them all.
    released = [
        int(r["example_id"].rsplit("-", 1)[1])
        for r in committed("kv_retrieval")
        if r["condition"]["source"] == "release-140"
    ]
    by_id = {}
    for name in ("book", "paper"):
        params = scale("kv_retrieval", name)
        per_cell = params["examples_per_cell"]  # one number, or one per number of pairs
        params["examples_per_cell"] = (
            {**per_cell, "140": max(per_cell["140"], 1 + max(released))}
            if isinstance(per_cell, dict)
            else max(per_cell, 1 + max(released))
        )
        for k in params["num_pairs"]:
            examples, source = kv_examples_for(k, params)
            by_id.update({(e.example_id, k, source): e for e in examples})
    cn = scale("cnorm", "book")
    for density, pairs, n in [
        ("low", cn["kv_low_pairs"], cn["kv_examples"]),
        ("high", cn["kv_high_pairs"], cn["kv_high_examples"]),
        ("low", cn["sweep_pairs"], cn["sweep_examples"]),
    ]:
        num_hex = {"low": 32, "high": 128}[density]
        by_id.update(
            {
                (e.example_id, pairs, f"synthetic-{num_hex}"): e
                for e in kv.synthetic_examples(n, pairs, seed=cn["seed"], num_hex=num_hex)
            }
        )
    checked = 0
    for row in [*committed("kv_retrieval"), *committed("cnorm_kv")]:
        c = row["condition"]
        if "density" in c:
            base = by_id[(row["example_id"], c["num_pairs"], f"synthetic-{c['num_hex']}")]
            ex = kv.to_example(base, c["source"], density=c["density"], num_hex=c["num_hex"])
            chain = [T.IdFormat(c["delimiter"])]
        else:
            ex, chain = (
                kv.to_example(by_id[(row["example_id"], c["num_pairs"], c["source"])], c["source"]),
                [],
            )
        chain += [T.Position(c["gold_index"] + 1), T.QueryAware(c["query_aware"])]
        assert key_of(row, render(T.apply(ex, chain))) == row["key"], (row["example_id"], c)
        checked += 1
    assert checked > 1000


def test_every_committed_competition_row_is_rebuilt_with_its_key():
    from longctx.tasks import semantic_competition as sc

    params = scale("semantic_competition", "book")
    rows = list(committed("semantic_competition"))
    corpora = {
        name: sc.load_corpus(name).limit_passages(params["max_passages"] or None)
        for name in {r["condition"]["corpus"] for r in rows}
    }
    questions = {
        q.question_id: q
        for name, corpus in corpora.items()
        for q in sc.sample_questions(
            corpus,
            params["headline_questions"] if name == params["corpus"] else params["nq_questions"],
            params["seed"],
        )
    }
    indexes, examples, checked = {}, {}, 0
    for row in rows:
        c = row["condition"]
        retriever = "bm25" if c["retriever"] == "none" else c["retriever"]
        where = (c["corpus"], c["snippet_words"], retriever)
        if where not in indexes:
            options = {"model": params["dense_model"]} if retriever == "dense" else {}
            indexes[where] = sc.SnippetIndex(
                corpora[c["corpus"]], c["snippet_words"], retriever, **options
            )
        if (where, row["example_id"]) not in examples:
            examples[(where, row["example_id"])] = sc.to_example(
                indexes[where], questions[row["example_id"]]
            )
        ex = examples[(where, row["example_id"])]
        chain = []
        if c["num_hard"] + c["num_far"]:
            chain = [
                T.Competitors(c["num_hard"]),
                T.Competitors(c["num_far"], "far", c.get("far_from", 0.5), seed=c["seed"]),
                T.Scatter(c["seed"]),
            ]
        assert key_of(row, render(T.apply(ex, chain))) == row["key"], (row["example_id"], c)
        checked += 1
    assert checked == len(rows) > 1200  # the 200 headline questions included


def test_every_committed_length_alone_row_is_rebuilt_with_its_key():
    from longctx.chapters import length_alone as chapter
    from longctx.tasks import length_alone as la

    params = scale("length_alone", "book")
    problems = {p.id: p for ps in chapter.design.problems_for(params).values() for p in ps}
    checked = 0
    for row in committed("length_alone"):
        c = row["condition"]
        problem = problems[row["example_id"]]
        if c["mode"] == "recite":  # two-prompt modes stay in the task module, not the algebra
            kind = c["filler"] if c["filler_tokens"] else "essay"
            placement = c["placement"] if c["filler_tokens"] else "between"
            (request,) = la.make_requests(
                [problem],
                filler_kinds=[kind],
                lengths=[c["filler_tokens"]],
                placements=[placement],
                mode="recite",
            )
            assert key_of(row, request) == row["key"], c
            checked += 1
            continue
        chain = (
            [T.Padding(c["filler"], c["filler_tokens"], c["placement"])]
            if c["filler_tokens"]
            else []
        )
        assert key_of(row, render(T.apply(la.to_example(problem), chain))) == row["key"], c
        checked += 1
    assert checked > 1000


def test_every_committed_needle_row_is_rebuilt_with_its_key():
    from longctx.chapters import tag_needles as chapter
    from longctx.models import load_tokenizer
    from longctx.tasks import tag_needles as tn

    params = {**scale("tag_needles", "book"), "model": "qwen2.5-coder-0.5b-instruct"}

    def no_model():
        raise AssertionError("every LLM tag is committed; the tagger must not load")

    taggers = chapter.design.taggers_for(params, ROOT / "data" / "results", load_tagger=no_model)
    for kind in ("spacy", "llm"):
        T.register_tagger(kind, getattr(taggers, kind), taggers.caches.get(kind))
    text, cases = chapter.design.cases_for(params)
    # The grid's cases, and every case of both needle sets for the headline pair at long_length.
    by_id = {c.id: c for c in [*cases, *chapter.design.long_cases(params, text)]}
    chunks: dict = {}  # (model, length) -> the haystack, cut in that reader's tokens

    def haystack(model, n):
        if (model, n) not in chunks:
            chunks[model, n] = tn.haystack_chunks(
                load_tokenizer(model),
                n,
                strategy=params["chunk_strategy"],
                max_chars=params["chunk_chars"],
                text=text,
            )
        return chunks[model, n]

    tags = {
        "baseline": [],
        "framing": [T.Tags("", False, framing=True)],
        "td": [T.Tags("", True)],
        "td_tc_spacy": [T.Tags("spacy", True, chunk_chars=0)],
        "td_tc_llm": [T.Tags("llm", True, chunk_chars=0)],
        # TD+TC's system message (spaCy's definitions) over an untagged context
        "td_tc_system": [T.Tags("", True, message="td_tc_system")],
    }
    checked = 0
    for row in committed("tag_needles"):
        c = row["condition"]
        ex = tn.to_example(
            by_id[row["example_id"]], haystack(row["model"], c["length"]), c["length"]
        )
        chain = [T.Position(c["depth"]), *tags[c["variant"]], T.QueryAware(c["query_aware"])]
        assert key_of(row, render(T.apply(ex, chain))) == row["key"], (row["example_id"], c)
        checked += 1
    assert checked > 300


def test_the_methods_page_example_of_a_new_transform_works_as_written():
    """The ten-line example in book/methods.md, executed from the page itself."""
    import re

    page = (ROOT / "book" / "methods.md").read_text()
    code = next(
        block for block in re.findall(r"```python\n(.*?)```", page, re.S) if "DropTitles" in block
    )
    namespace = {"T": T}
    try:
        exec(code, namespace)
        req = render(T.apply(example(), [T.Competitors(2), T.make("drop_titles"), T.Position(1)]))
        assert req.condition["titles"] == "dropped" and "(Title: )" in req.prompt
        assert (
            "titles" not in render(T.apply(example(), [T.Competitors(2), T.Position(1)])).condition
        )
    finally:
        T.TRANSFORMS.pop("drop_titles", None)
        T.RECORDED.remove("titles")


def test_the_methods_page_example_of_composing_runs_as_written():
    import re

    page = (ROOT / "book" / "methods.md").read_text()
    code = next(
        block
        for block in re.findall(r"```python\n(.*?)```", page, re.S)
        if "render(T.apply" in block
    )
    namespace = {}
    exec(code, namespace)
    req = namespace["request"]
    assert req.condition["num_documents"] == 20 and req.condition["method"] == "C-NORM"
    assert (
        req.condition["filler_tokens"] == 2000
        and req.condition["query_aware"]
        and req.condition["gold_index"] == 9
    )
