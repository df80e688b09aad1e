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
from .errors import ParameterError
from .runner import Block


def chapter_blocks(
    chapters: Sequence[str],
    scale_name: str,
    overrides: dict | None = None,
    per_chapter: dict[str, str] | None = None,
    model: str | None = None,
    dry_run: bool = False,
    only: Sequence[str] | None = None,
) -> ChapterPlan:
    """Every named chapter's blocks at a scale (``per_chapter`` may name another scale for
    some chapters): all headline blocks first (chapter order), then the rest. ``overrides``
    maps a chapter to parameter overrides. A chapter whose prompts depend on the reader
    (``NEEDS_MODEL``: token-counted haystacks) gets ``model`` as ``params["model"]``; one
    whose plan may run a model (``PLANS_RUN_MODELS``: the LLM tagger) gets ``dry_run``.
    ``only`` keeps the blocks whose name holds one of its strings.

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
    return ChapterPlan(modules, params, only)


class ChapterPlan:
    """The blocks of several chapters in run order (headline blocks of every chapter first),
    each chapter's plan built when first reached; it can say which blocks it has not handed
    out yet without building more (:meth:`unreached`), so a run stopped by its deadline
    counts what it left."""

    def __init__(self, modules: dict, params: dict, only: Sequence[str] | None = None):
        self.modules, self.params, self.only = modules, params, list(only or [])
        self._plans: dict[str, list[Block]] = {}
        self._given: set[int] = set()

    def _blocks(self, chapter: str) -> list[Block]:
        if chapter not in self._plans:
            self._plans[chapter] = self.modules[chapter].plan(self.params[chapter])
        return self._plans[chapter]

    def _wanted(self, block: Block) -> bool:
        return not self.only or any(part in block.name for part in self.only)

    def __iter__(self) -> Iterator[Block]:
        for headline in (True, False):
            for chapter in self.modules:
                for block in self._blocks(chapter):
                    if block.headline == headline and self._wanted(block):
                        self._given.add(id(block))
                        yield block
        if self.only and not self._given:
            raise ParameterError(
                f"--only {' '.join(self.only)} matches no block; --dry-run without it lists them"
            )

    def unreached(self) -> tuple[list[Block], list[str]]:
        """The wanted blocks of built plans not handed out yet, and the chapters whose plans
        were never built (their blocks are unknown until then)."""
        blocks, unbuilt = [], []
        for chapter in self.modules:
            if chapter not in self._plans:
                unbuilt.append(f"chapter {chapter}")
                continue
            blocks += [
                b for b in self._plans[chapter] if id(b) not in self._given and self._wanted(b)
            ]
        return blocks, unbuilt
