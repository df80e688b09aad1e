"""Execute the book's notebooks in parallel into Jupyter Book's execution cache.

``jupyter-book build`` (``execute_notebooks: cache``) runs each page's notebook one after
another. This fills the same cache first, ``--jobs`` notebooks at a time, exactly as MyST-NB
would (the page read by jupytext, run by jupyter-cache's ``single_nb_execution`` in the
notebook's folder, stored under the staged path), so the build that follows finds every
page executed. A notebook whose code is already cached is skipped; one that fails here, in a
cell or before its first (a kernel that does not start, as when two kernels starting at once
race for a port), is left to the build, which runs it again alone and reports any error as it
always does.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_notebooks(root: Path) -> list[Path]:
    """The ``.py`` notebooks that ``_toc.yml`` lists, in its order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part.get("chapters", [])]
    return [root / f"{f}.py" for f in files if (root / f"{f}.py").is_file()]


def read(path: Path):
    """The notebook as MyST-NB reads it (``nb_custom_formats``: jupytext, py:percent)."""
    import jupytext

    return jupytext.reads(path.read_text(encoding="utf-8"), fmt="py:percent")


def execute(path: Path, timeout: int):
    """Run one notebook as MyST-NB's cache client does; the executed notebook, seconds and the
    error's text (None when it ran)."""
    from jupyter_cache.executors.utils import single_nb_execution

    nb = read(path)
    try:
        result = single_nb_execution(
            nb, cwd=str(path.parent), allow_errors=False, timeout=timeout, meta_override=True
        )
    except Exception as err:  # a kernel that never started: the build retries
        return nb, 0.0, f"{type(err).__name__}: {err}"
    error = None if result.err is None else f"{type(result.err).__name__}: {result.err}"
    return nb, result.time, error


def main(argv=None, pages: list[Path] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / "_build" / ".jupyter_cache"))
    ap.add_argument("--jobs", type=int, default=2, help="notebooks run at once (default 2)")
    ap.add_argument("--timeout", type=int, default=7200, help="seconds per cell (as _config.yml)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        print("execute_book: --jobs must be at least 1", file=sys.stderr)
        return 2
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(args.cache)
    todo = []
    for path in toc_notebooks(ROOT) if pages is None else pages:
        try:
            cache.match_cache_notebook(read(path))
        except KeyError:
            todo.append(path)
    if not todo:
        print("execute_book: every notebook is already executed in the cache")
        return 0
    # The largest notebooks first, so the last one to finish is a short one.
    todo.sort(key=lambda p: p.stat().st_size, reverse=True)
    started = time.perf_counter()
    print(f"execute_book: {len(todo)} notebooks, {args.jobs} at a time", flush=True)
    failed = 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(execute, path, args.timeout): path for path in todo}
        for future in as_completed(futures):
            path = futures[future]
            try:
                nb, seconds, error = future.result()
            except Exception as err:  # a worker that died: the build retries
                error = f"{type(err).__name__}: {err}"
            name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            if error is not None:
                failed += 1
                print(f"  {name}: failed ({error.splitlines()[0][:200]}); the build reruns it")
                continue
            stage = cache.add_nb_to_project(str(path))
            cache.cache_notebook_bundle(
                CacheBundleIn(nb, stage.uri, data={"execution_seconds": seconds}),
                check_validity=False,
                overwrite=True,
            )
            print(f"  {name}: {seconds:.0f} s", flush=True)
    print(
        f"execute_book: {len(todo) - failed} of {len(todo)} executed in "
        f"{time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
