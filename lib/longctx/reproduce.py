"""``longctx reproduce``: every chapter's generations at a named scale, outside the notebooks.

For each chapter, :func:`longctx.chapters.get_chapter` gives the plan (the same requests the
notebook builds, so the same store keys), cut into blocks with the headline comparison
first; :func:`chapter_blocks` orders every chapter's blocks, headline blocks first, and
:func:`longctx.runner.run` runs them in chunks until a deadline. Rows already stored are
skipped, so an interrupted run resumes, and a run with everything stored loads no model and
reports only cache hits. The rows a run adds can be copied, xz-compressed and flat, to a
folder (a lent GPU machine returns a few flat files); ``longctx merge`` takes them back.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .chapters import get_chapter, scale
from .runner import Block


def chapter_blocks(
    chapters: Sequence[str],
    scale_name: str,
    overrides: dict | None = None,
    per_chapter: dict[str, str] | None = None,
    model: str | None = None,
    dry_run: bool = False,
) -> Iterator[Block]:
    """Every named chapter's blocks at a scale (``per_chapter`` may name another scale for
    some chapters): all headline blocks first (chapter order), then the rest. ``overrides``
    maps a chapter to parameter overrides. A chapter whose prompts depend on the reader
    (``NEEDS_MODEL``: token-counted haystacks) gets ``model`` as ``params["model"]``; one
    whose plan may run a model (``PLANS_RUN_MODELS``: the LLM tagger) gets ``dry_run``.

    Chapters, scales and overrides are checked at once; each chapter's plan is built when
    the iteration first reaches one of its blocks, so a run starts on the first headline
    block without waiting for plans that run the LLM tagger or size long contexts."""
    modules, params = {}, {}
    for chapter in chapters:
        module = modules[chapter] = get_chapter(chapter)
        params[chapter] = scale(
            chapter,
            (per_chapter or {}).get(chapter, scale_name),
            **(overrides or {}).get(chapter, {}),
        )
        if getattr(module, "NEEDS_MODEL", False):
            params[chapter]["model"] = model
        if getattr(module, "PLANS_RUN_MODELS", False):
            params[chapter]["dry_run"] = dry_run
    plans: dict[str, list[Block]] = {}

    def blocks_of(chapter: str) -> list[Block]:
        if chapter not in plans:
            plans[chapter] = modules[chapter].plan(params[chapter])
        return plans[chapter]

    def ordered() -> Iterator[Block]:
        for headline in (True, False):
            for chapter in chapters:
                yield from (b for b in blocks_of(chapter) if b.headline == headline)

    return ordered()
