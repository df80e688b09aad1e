"""A page's sections as data: the registry refuses a name twice, a builder may return a
section or only its parts, and a part that is not one is refused when the section is made."""

from types import SimpleNamespace

import pandas as pd
import pytest

from longctx.section import (
    COMMON,
    Downloads,
    Example,
    Figure,
    PaperTable,
    Section,
    Sections,
    Table,
    parts_of,
)


def test_a_section_name_is_declared_once_and_never_one_every_page_has():
    sections = Sections()
    sections("headline")(lambda result, run: Table(pd.DataFrame({"a": [1]}), caption="A."))
    with pytest.raises(ValueError, match="declared twice"):
        sections("headline")
    with pytest.raises(ValueError, match="declared twice"):
        sections(next(iter(COMMON)))
    with pytest.raises(KeyError, match="no section 'nope'; this chapter's: headline, downloads"):
        sections.build("nope", None, None)


def test_a_builder_may_return_a_section_a_part_or_a_tuple_of_parts():
    sections = Sections()
    frame = pd.DataFrame({"a": [1]})
    table = Table(frame, caption="What it is.")
    sections("one")(lambda result, run: table)
    sections("two")(lambda result, run: (table, "**Data.** rows."))
    sections("whole")(lambda result, run: Section((Downloads(),), quoted={"k": 1}))
    assert sections.build("one", None, None).parts == (table,)
    assert sections.build("two", None, None).parts[1] == "**Data.** rows."
    assert sections.build("whole", None, None).quoted == {"k": 1}
    result = SimpleNamespace(provenance="**Data.** 3 rows.")
    assert sections.build("provenance", result, None).parts == ("**Data.** 3 rows.",)


def test_a_table_without_a_caption_is_refused():
    frame = pd.DataFrame({"a": [1]})
    with pytest.raises(TypeError, match="caption"):
        Table(frame)
    with pytest.raises(ValueError, match="a table needs a caption"):
        Table(frame, caption=" ")
    with pytest.raises(ValueError, match="the paper's table t: give a caption"):
        PaperTable("t")
    with pytest.raises(
        TypeError, match="items \\[1\\]: a table is a \\(DataFrame, caption\\) pair"
    ):
        parts_of(["words", frame])
    assert parts_of([(frame, "What it is."), "words"])[0].caption == "What it is."


def test_a_part_that_is_not_one_and_a_figure_without_text_are_refused():
    with pytest.raises(TypeError, match="not \\[42\\]"):
        Section((42,))
    with pytest.raises(ValueError, match="give a figure and its text"):
        Figure("fig-x", object())
    assert Figure("fig-x", None, missing="No rows.").missing == "No rows."


def test_a_figure_is_drawn_only_where_its_rows_are_stored_and_an_example_sits_at_the_largest_size():
    drawn = Figure.when(True, "fig-x", lambda: "figure", lambda: "text", "No rows.")
    assert (drawn.figure, drawn.text, drawn.missing) == ("figure", "text", "")
    missing = Figure.when(False, "fig-x", pytest.fail, pytest.fail, "No rows.")
    assert (missing.figure, missing.missing) == (None, "No rows.")
    example = Example.largest("kv", {"num_pairs": [10, 140, 30]}, "num_pairs", "{} pairs")
    assert example == Example("kv", "140 pairs", {"num_pairs": 140, "query_aware": False})
