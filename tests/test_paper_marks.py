"""The paper's numbers drawn beside ours are read from data/paper exactly: each mark checked
against the paper's table by hand."""

from types import SimpleNamespace

import pandas as pd
import pytest

from longctx.chapters.length_alone import sections as length_sections
from longctx.chapters.multidoc_qa import sections as multidoc_sections
from longctx.chapters.semantic_competition import sections as competition_sections
from longctx.chapters.tag_needles import sections as tag_sections
from longctx.paths import repo_root


def paper(name: str) -> pd.DataFrame:
    return pd.read_csv(repo_root() / "data" / "paper" / f"{name}.csv")


DESIGN = "GSM8K (paper's design)"


@pytest.mark.parametrize(
    "reader,marks",
    [
        # Llama-3-8B, GSM8K: Table 6 essay 87.8 - 9.0; Table 7 whitespace 87.5 - 3.2; Table 3
        # mask 86.1 - 4.3; Table 8 whitespace before the evidence 85.5 - 8.1
        ("Llama3-8B", (78.8, 84.3, 81.8, 77.4)),
        # Mistral-7B: Table 6 essay 70.6 - 28.9; Table 7 whitespace 70.0 - 24.0; Table 3 mask
        # 64.5 - 8.2; Table 8 before 64.2 - 9.3
        ("Mistral-7B-v0.3", (41.7, 46.0, 56.3, 54.9)),
    ],
)
def test_length_alone_marks_are_no_filler_accuracy_plus_the_drop_at_15k(reader, marks):
    conditions = ("essay", "whitespace", "masked", "whitespace, before the evidence")
    assert length_sections.paper_bars(paper("length_alone"), reader) == pytest.approx(
        {(DESIGN, c): m for c, m in zip(conditions, marks)}
    )


def test_multidoc_curve_is_gpt35_turbo_from_tables_5_and_6():
    curve = multidoc_sections.paper_curve(paper("lost_in_the_middle_qa")).set_index(
        ["num_documents", "position"]
    )["accuracy"]
    assert curve[10, 1] == pytest.approx(0.768) and curve[10, 10] == pytest.approx(0.624)
    assert curve[20, 10] == pytest.approx(0.538) and curve[20, 20] == pytest.approx(0.632)
    assert len(curve) == 3 + 5  # positions 1/5/10 at 10 documents, 1/5/10/15/20 at 20


def test_competition_marks_are_section_4_1_retention_and_table_1():
    retention = competition_sections.paper_retention(paper("semantic_competition"))
    r = retention.set_index(["retriever", "metric"])["R"]
    assert r["bm25", "EM"] == pytest.approx(24.0 / 31.0)
    assert r["dense", "F1"] == pytest.approx(0.405 / 0.575)
    assert set(retention["num_hard"]) == {79}
    matched = competition_sections.paper_matched(paper("semantic_competition"))
    labels = competition_sections.MATCHED_CONDITIONS
    assert matched["EM", labels["hard"]] == 22.0
    assert matched["inclusion", labels["far"]] == 67.0


def test_tagging_curve_and_changes_are_claude_35_at_the_shared_lengths():
    table = paper("tag_needles")
    curve = tag_sections.paper_curve(table, [250, 500, 1000]).set_index(["label", "length"])
    assert curve.loc[("TD", 250), "accuracy"] == pytest.approx(0.9134)
    assert set(curve.index.get_level_values("length")) == {250, 500}  # no 1,000 in Table 1
    view = SimpleNamespace(
        paper=table,
        params={"short_length": 250, "long_length": 2000},
        short={
            "gains": pd.DataFrame(
                {"change": [-30.0], "ci_low": [-40.0], "ci_high": [-20.0], "needles": [87]},
                index=["td"],
            )
        },
        long=None,
    )
    row = tag_sections.sized_differences(view).iloc[0]
    assert row["paper"] == pytest.approx(91.34 - 81.19)  # TD minus baseline at 250 tokens
    assert row["label"] == "TD, 250 tokens (87 needles)"


def test_the_kv_worst_case_is_read_once_from_the_papers_table():
    from longctx.chapters.kv_retrieval import numbers, sections

    assert numbers.paper_worst_case() == pytest.approx(0.456)  # Section 4.2: "45.6%"
    label, level, style = sections.paper_worst_reference()
    assert (label, level) == ("paper's worst case, any model (45.6%)", pytest.approx(45.6))


def test_a_paper_percent_names_a_missing_or_ambiguous_row_in_one_line(tmp_path, monkeypatch):
    from longctx import claims
    from longctx.errors import DataFileError

    (tmp_path / "data" / "paper").mkdir(parents=True)
    (tmp_path / "data" / "paper" / "toy.csv").write_text(
        "setting,statistic,value\na,worst,45.6%\nb,worst,12.5%\nc,best,near-perfect\n"
    )
    monkeypatch.setattr(claims, "repo_root", lambda: tmp_path)
    assert claims.paper_percent("toy", setting="b") == pytest.approx(0.125)
    with pytest.raises(DataFileError, match="2 rows with statistic='worst', not 1"):
        claims.paper_percent("toy", statistic="worst")
    with pytest.raises(DataFileError, match="'near-perfect', not a percentage"):
        claims.paper_percent("toy", setting="c")
    with pytest.raises(DataFileError, match="toy2.csv is missing"):
        claims.paper_percent("toy2", setting="a")
