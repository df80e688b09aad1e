"""Small fixes to the built pages, found by scripts/check_book.py in headless Chromium, and
the downloads the pages link to.

* After an HTML build, every committed store's rows (CSV, packed JSONL and a sample
  browser page), the findings table (CSV) and the executed notebooks are written to
  ``downloads/`` in the site (``longctx.downloads``).

* The reference list's labels read as author and year, "Liu et al., 2024", like the
  citations in the text (``bibtex_default_style: longctx``), not pybtex's generated alpha
  keys ("LLH+24"; "Anonymousauthors25" for a paper under double-blind review).

* Every page ends with the commit, version and date it was built from (pages that compute
  numbers also say it beside them).

* sphinx-thebe and sphinx-book-theme both add the inline ``const THEBE_JS_URL = ...``
  script, and the second declaration is a SyntaxError on every page: keep one copy of each
  identical inline script.
"""


from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as _Unsrt
from pybtex.style.labels import BaseLabelStyle


def author_year(entry) -> str:
    """"Surname, year", "Surname and Surname, year" or "Surname et al., year"; an
    institutional author ("{Anonymous authors}") whole."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [" ".join(p.last_names) or " ".join(p.first_names) for p in people]
    names = [n.replace("{", "").replace("}", "") for n in names]
    if not names:
        who = entry.fields.get("title", entry.key)
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        seen: dict[str, int] = {}
        for entry in sorted_entries:
            label = author_year(entry)
            seen[label] = seen.get(label, 0) + 1
            # Two works of one author and year: 2024a, 2024b (the first keeps its plain label).
            yield label if seen[label] == 1 else f"{label}{chr(ord('a') + seen[label] - 1)}"


class LongctxStyle(_Unsrt):
    default_label_style = AuthorYearLabels


register_plugin("pybtex.style.formatting", "longctx", LongctxStyle)


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


def _commit_line(app, pagename, templatename, context, doctree):
    if "body" not in context or pagename in ("genindex", "search"):
        return
    from longctx import __version__
    from longctx.paths import build_commit, build_date

    context["body"] += (
        f'<p class="build-line">longctx {__version__}, built from commit '
        f"<code>{build_commit(app.srcdir)}</code> of {build_date(app.srcdir)}.</p>"
    )


def _write_downloads(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from pathlib import Path

    from longctx.downloads import write, write_notebooks

    write(Path(app.srcdir) / "data" / "results", app.outdir)
    write_notebooks(Path(app.outdir).parent / "jupyter_execute" / "notebooks", app.outdir)


def setup(app):
    app.connect("html-page-context", _dedupe_inline_scripts, priority=900)
    app.connect("html-page-context", _commit_line)
    app.connect("build-finished", _write_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
