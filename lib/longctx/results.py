"""Read every model's results for an experiment into one scored table."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .store import ResultsStore


def load_experiment(results_dir: str | Path, experiment: str, score: Callable[[dict], float],
                    task: str | None = None):
    """One row per generation for every model with results under ``results_dir/<model>/<experiment>``.

    Condition fields become columns; ``correct`` holds ``score(row)``. Prompt, gold and
    output are kept so that per-row analyses (error kinds) work on the table.
    """
    import pandas as pd

    records = []
    for path in sorted(Path(results_dir).glob(f"*/{experiment}/{ResultsStore.FILENAME}")):
        store = ResultsStore(results_dir, path.parent.parent.name, experiment)
        for row in store.rows():
            if task and row["task"] != task:
                continue
            records.append({
                "model": row["model"],
                "example_id": row["example_id"],
                **row["condition"],
                "prompt": row["prompt"],
                "gold": row["gold"],
                "output": row["output"],
                "prompt_tokens": row["prompt_tokens"],
                "new_tokens": row["new_tokens"],
                "seconds_per_prompt": row["seconds_per_prompt"],
                "longctx_version": row["longctx_version"],
                "correct": score(row),
            })
    return pd.DataFrame.from_records(records)


def provenance(df, results_dir: str | Path, experiment: str) -> str:
    """A one-paragraph caption naming files, models, sizes and library versions behind a figure."""
    if df.empty:
        return "no results"
    parts = []
    for model, group in df.groupby("model"):
        from .models import model_slug

        path = Path(results_dir).name + f"/{model_slug(model)}/{experiment}/{ResultsStore.FILENAME}"
        versions = ", ".join(sorted(group["longctx_version"].unique()))
        parts.append(f"{model}: {len(group)} generations in `{path}` (longctx {versions})")
    return "; ".join(parts)
