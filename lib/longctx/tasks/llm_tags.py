"""The LLM tagger's prompts as a task: one request per distinct chunk and tagging method
(the paper's classification or IE prompt, Figures 7 and 8), built and parsed by
:class:`longctx.chapters.tag_needles.tagger.LLMTagger` and answered through the runner, so its rows are found,
browsed, downloaded and replayed like any other task's. A row has no accuracy of its own:
what it yields is the tags read from its answer (:func:`tags`)."""

from __future__ import annotations

from ..tagging import TAG_TASK, load_categories, merged_tags

TASK = TAG_TASK


def tags(row: dict, categories: str = "privileged", min_confidence: int = 1) -> list[str]:
    """The category names a stored row's answer names (the tagger's own parsing)."""
    outputs = {row["condition"]["method"]: row["raw_output"]}
    return merged_tags(outputs, load_categories(categories), min_confidence)
