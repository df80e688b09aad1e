"""One worked example per chapter: a prompt the reader was given, with a right and a wrong
answer and their scores, shown collapsed under the chapter's key figure.

The rows are the chapter's own committed rows; each is scored by its task's ``score``
(:func:`longctx.tasks.row_score`), so the example shows the metric the chapter reports.
Long prompts are elided in the middle, with the count of what was left out.
"""

from __future__ import annotations

import html

from .report import elide
from .tables import condition_words
from .tasks import row_score

KEEP_CHARS = 1200  # of a long prompt, shown from each end


def matches(condition: dict, where: dict) -> bool:
    """Whether ``condition`` has every field of ``where`` at its value (a nested dict is
    matched field by field)."""
    return all(
        matches(condition.get(k) or {}, v) if isinstance(v, dict) else condition.get(k) == v
        for k, v in where.items()
    )


def right_and_wrong(rows: list[dict], where: dict | None = None) -> tuple[dict | None, dict | None]:
    """The first row (in stored order) with a full score and the first with a score of 0,
    among the generations whose condition ``matches`` ``where``."""
    right = wrong = None
    for r in rows:  # stops at the first of each: a store holds thousands of rows
        if "prompt" not in r or "condition" not in r or not matches(r["condition"], where or {}):
            continue
        score = row_score(r)
        if right is None and score is not None and score >= 1:
            right = r
        elif wrong is None and score == 0:
            wrong = r
        if right is not None and wrong is not None:
            break
    return right, wrong


def _one(label: str, row: dict) -> str:
    gold = ", ".join(map(str, row.get("gold") or []))
    tokens = f"{row['prompt_tokens']:,} prompt tokens; " if row.get("prompt_tokens") else ""
    nested = frozenset(k for k, v in row["condition"].items() if isinstance(v, dict))
    condition = condition_words(row["condition"], nested)
    return (
        f"<p><strong>{label}</strong>: example <code>{html.escape(row['example_id'])}</code> "
        f"({tokens}gold: <code>{html.escape(gold)}</code>; {html.escape(condition)}). The "
        "reader answered "
        f"<code>{html.escape(str(row.get('output', '')).strip())}</code>, score "
        f'{row_score(row):g}.</p>\n<pre class="example-prompt">{html.escape(elide(row["prompt"], KEEP_CHARS))}</pre>'
    )


def example_html(rows: list[dict], *, what: str, where: dict | None = None) -> str:
    """A collapsed block (HTML ``details``, which Markdown output passes through) with the
    prompt and answer of a right and a wrong row under ``what`` (the condition in words)."""
    right, wrong = right_and_wrong(rows, where)
    if right is None and wrong is None:
        return f"No stored generation under {what} to show as an example."
    parts = [_one("Right", right)] if right else []
    parts += [_one("Wrong", wrong)] if wrong else []
    missing = "" if right and wrong else " (every stored answer here scored the same)"
    return (
        f'<details class="example"><summary>Example prompts and answers: {html.escape(what)}'
        f"{missing}</summary>\n" + "\n".join(parts) + "\n</details>"
    )
