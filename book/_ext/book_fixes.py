"""Small fixes to the built pages, found by scripts/check_book.py in headless Chromium, and
the downloads the pages link to.

* After an HTML build, every committed store's rows (CSV, packed JSONL and a sample
  browser page), the findings table (CSV) and the executed notebooks are written to
  ``downloads/`` in the site (``longctx.downloads``).

* sphinx-thebe and sphinx-book-theme both add the inline ``const THEBE_JS_URL = ...``
  script, and the second declaration is a SyntaxError on every page: keep one copy of each
  identical inline script.
"""


def _dedupe_inline_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        body = (
            getattr(script, "attributes", {}).get("body") if hasattr(script, "attributes") else None
        )
        key = ("body", body) if body else ("src", str(script))
        if body and key in seen:
            continue
        seen.add(key)
        kept.append(script)
    context["script_files"] = kept


def _write_downloads(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from pathlib import Path

    from longctx.downloads import write, write_notebooks

    write(Path(app.srcdir) / "data" / "results", app.outdir)
    write_notebooks(Path(app.outdir).parent / "jupyter_execute" / "notebooks", app.outdir)


def setup(app):
    app.connect("html-page-context", _dedupe_inline_scripts, priority=900)
    app.connect("build-finished", _write_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
