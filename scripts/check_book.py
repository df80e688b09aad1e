"""Open every page of the built book in headless Chromium and fail on what a reader would see.

Serves ``_build/html`` on 127.0.0.1 and, for every page:

* no console errors (Chromium's SEVERE log entries: failed scripts, missing files, ...);
* every image loaded (``naturalWidth > 0``);
* MathJax rendered: no raw TeX delimiters left in the visible text, and a page that had math
  holds MathJax output;
* every internal link resolves: the target file exists and, for ``#anchor`` links, the
  target page has an element with that id;
* every page's hidden check cell verified the statements of its prose in this build: it
  prints "claims checked: N", read from the build's execution cache, and N = 0 (a guard
  that no longer matches the committed run) fails like a broken page;
* every ``{glue:text}`key``` of a page's prose was glued by its executed notebook: a
  missing key would print nothing where a number belongs;
* no figure's caption or alt text types a number in the notebook (figures are glued with
  a section's ``Figure``, ``page.show``, their caption and alt text computed by their chapter), and no
  chapter's prose types a result-like number (a decimal, a percentage, a signed value) that
  is neither glued nor one the paper gives in ``data/paper`` (``typed_prose_numbers``);
* at 1400 px wide the page never scrolls sideways, no table hides columns (scrolls inside
  itself), no text runs past the column, and every figure has a caption and is referenced
  from the page's text;
* every figure is shown large enough to read: its smallest text (``longctx.plots``
  refuses to draw any below ``MIN_FONT_PT``) is at least ``MIN_RENDERED_PT`` once the
  image is scaled to its column, from the image's pixel width, its DPI and its shown width;
* no table follows another with neither a caption nor words between them;
* no table header shows a raw identifier (a column name such as ``ci_low``, an id such as
  ``baseline+qac``: ``RAW_HEADER``) or one bound of an interval split from it
  (``95% CI low``: ``SPLIT_INTERVAL``);
* every external link is well formed (a web address with a host, not fetched: CI is
  offline).

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package (``make
check-book`` installs them). Exit status 1 lists every problem; 0 prints a summary.

    python scripts/check_book.py [--html _build/html]
"""

from __future__ import annotations

import argparse
import csv
import functools
import html
import http.server
import re
import shutil
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

from longctx.plots import COLUMN_INCHES, MIN_FONT_PT

MIN_RENDERED_PT = 10.0
# A chapter page that dumps data instead of showing it: the row browsers (downloads/) are
# exempt, being data pages by design.
MAX_PAGE_BYTES = 1_500_000
MAX_PAGE_HEIGHT_PX = 60_000  # at 1400 px wide
MAX_OUTPUT_LINES = 80  # one cell's printed text
RAW_HEADER = re.compile(r"_|^Unnamed|^index$|^level \d|^[\w.]+\+[\w.]+$")
# One bound of an interval in a header: the interval is split across two columns
SPLIT_INTERVAL = re.compile(r"\bCI (low|high)\b|\b(lower|upper)( bound)?$", re.IGNORECASE)
RAW_TEX = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{")
CHECKED = re.compile(r"claims checked: (\d+)")
GLUE_ROLE = re.compile(r"\{glue(?::[a-z]+)?\}`([^`:]+)(?::[^`]*)?`")
GLUE_DIRECTIVE = re.compile(r"```\{glue(?::[a-z]+)?\}\s+(\S+)")


class _Links(HTMLParser):
    """Hrefs and element ids of one HTML file."""

    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag in ("a", "area") and attrs.get("href"):  # area: a linked point of a figure
            self.hrefs.append(attrs["href"])


def parse(path: Path) -> _Links:
    links = _Links()
    links.feed(path.read_text(encoding="utf-8", errors="replace"))
    return links


def malformed_external(href: str) -> str | None:
    """Why an external link is malformed, or None: a web address needs http(s) and a host
    with a dot, and no spaces (nothing is fetched: the check runs offline)."""
    url = urlparse(href)
    if url.scheme in ("mailto", "javascript"):
        return None
    if url.scheme not in ("http", "https"):
        return f"scheme {url.scheme!r} is not http(s)"
    if "." not in url.netloc or any(c.isspace() for c in href):
        return "no host, or spaces in the address"
    return None


def broken_links(root: Path, pages: list[Path]) -> list[str]:
    """Internal links whose file or anchor does not exist, and malformed external links."""
    parsed = {p: parse(p) for p in pages}
    problems = []
    for page, links in parsed.items():
        for href in links.hrefs:
            url = urlparse(href)
            if url.scheme or url.netloc or href.startswith(("mailto:", "javascript:")):
                if why := malformed_external(href):
                    problems.append(f"{page.relative_to(root)}: malformed link {href!r}: {why}")
                continue
            target_path, anchor = urldefrag(href)
            target = page if not target_path else (page.parent / unquote(target_path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                problems.append(f"{page.relative_to(root)}: link to missing {href}")
                continue
            # a fragment with "=" sets a sample browser's filters (checked by empty_filters)
            if anchor and target.suffix == ".html" and "=" not in anchor:
                ids = parsed[target].ids if target in parsed else parse(target).ids
                if unquote(anchor) not in ids:
                    problems.append(f"{page.relative_to(root)}: link to missing anchor {href}")
    return problems


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    missing: list[str] = []

    def log_message(self, *args):  # no access log on stderr
        pass

    def send_error(self, code, message=None, explain=None):
        if code == 404:
            _QuietHandler.missing.append(self.path)
        super().send_error(code, message, explain)


def checks_in_notebook(nb) -> int | None:
    """The N of a notebook's "claims checked: N" output, or None if it printed none."""
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            m = CHECKED.search(out.get("text", "") if out.get("output_type") == "stream" else "")
            if m:
                return int(m.group(1))
    return None


def glued_keys(nb) -> set[str]:
    """The keys an executed notebook glued (MyST-NB stores each as an output's ``scrapbook`` name)."""
    return {
        out.get("metadata", {}).get("scrapbook", {}).get("name")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    } - {None}


def glued_values(nb) -> dict[str, str]:
    """Each key an executed notebook glued as text, with the text it glued."""
    return {
        out["metadata"]["scrapbook"]["name"]: out.get("data", {}).get("text/plain", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("metadata", {}).get("scrapbook", {}).get("name")
    }


def glued_differently(values: dict[str, dict[str, str]]) -> list[str]:
    """Keys two pages glue with different values (``values``: page -> key -> text): one
    number the book states two ways, as a speed ratio or a row count said on two pages."""
    seen: dict[str, dict[str, str]] = {}
    for page, glued in values.items():
        for key, text in glued.items():
            seen.setdefault(key, {})[page] = text
    return [
        f"{key} is glued as {' and as '.join(repr(t) for t in dict.fromkeys(pages.values()))} "
        f"on {', '.join(pages)}"
        for key, pages in sorted(seen.items())
        if len(set(pages.values())) > 1
    ]


def missing_glue_keys(nb) -> list[str]:
    """Keys the notebook's Markdown quotes with a glue role but no code cell glued."""
    quoted = {
        m.group(1)
        for c in nb.cells
        if c.cell_type == "markdown"
        for pattern in (GLUE_ROLE, GLUE_DIRECTIVE)
        for m in pattern.finditer(c.source)
    }
    return sorted(quoted - glued_keys(nb))


def typed_figure_numbers(nb) -> list[str]:
    """Figures whose caption or alt text in the cell metadata holds a digit: a number typed
    by hand, which the rows can leave behind. Every figure of the book is glued with text its
    chapter computes (a section's ``Figure``, ``page.show``)."""
    problems = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("mystnb", {})
        figure, image = meta.get("figure", {}), meta.get("image", {})
        name = figure.get("name", "(unnamed figure)")
        typed = " ".join(str(t) for t in (figure.get("caption", ""), image.get("alt", "")))
        if re.search(r"\d", typed):
            problems.append(
                f"figure {name}: its caption or alt text types a number; compute it in the "
                "chapter and glue the figure (a Figure of a section, page.show)"
            )
    return problems


# Prose a number check reads past: glue, references, code, links, markup, math, and names
# that hold digits (models, versions, sizes, sections, tables, figures).
PROSE_SKIPS = [
    re.compile(p, re.S)
    for p in (
        r"\{glue(?::\w+)?\}`[^`]*`",
        r"\{\w+\}`[^`]*`",
        r"```.*?```",
        r"`[^`]*`",
        r"\]\([^)]*\)",
        r"<[^>]+>",
        r"\$\$.*?\$\$",
        r"\$[^$]*\$",
        r"(?i)\b(?:claude|sonnet|gpt|qwen|llama|mistral|gemma|smollm|phi|squad|python|v)[\s-]?"
        r"\d+(?:\.\d+)*[a-z]?\b",
        r"(?i)\b\d+(?:\.\d+)?\s?(?:[BMK]|GB|GiB|MB|MiB)\b",
        r"(?i)\b(?:sections?|tables?|figures?|fig\.|appendix|eq\.)\s+[A-Z]?\d+(?:\.\d+)*"
        r"(?:\s*(?:,|and|-)\s*[A-Z]?\d+(?:\.\d+)*)*",
    )
]
# A number that reads as a result: a decimal, a percentage or a signed value.
RESULT_NUMBER = re.compile(
    r"(?<![\w.])([+\u2212\u00b1]|-(?=\d*\.\d))?(\d+(?:\.\d+)?|\.\d+)(\s?%)?(?![\w.]*\d)"
)
# The conventions every page states (the interval's level and width, the test's level).
CONVENTIONS = {"95%", "5%", "\u00b110", "\u00b15", "0.05", "1.96", "0.5"}
PAPER_DIR = Path(__file__).resolve().parents[1] / "data" / "paper"


def paper_numbers(chapter: str, root: Path | None = None) -> set[float]:
    """Every number the paper behind ``chapter`` gives, as committed: its rows of
    ``claims.csv`` and each ``data/paper`` table its notebook or module names (a fraction
    also as a percentage)."""
    root = root or PAPER_DIR.parents[1]
    paper = root / "data" / "paper"
    sources = [
        p.read_text(encoding="utf-8")
        for p in [
            root / "notebooks" / f"{chapter}.py",
            root / "lib" / "longctx" / "chapters" / f"{chapter}.py",
        ]
        + sorted((root / "lib" / "longctx" / "chapters" / chapter).glob("*.py"))
        if p.exists()
    ]
    cells = [
        cell
        for row in csv.reader((paper / "claims.csv").open(encoding="utf-8"))
        if len(row) > 2 and row[2] == chapter
        for cell in row
    ]
    for table in sorted(paper.glob("*.csv")):
        if any(f'"{table.stem}"' in text for text in sources):
            cells += [c for row in csv.reader(table.open(encoding="utf-8")) for c in row]
    values = set()
    for cell in cells:
        for m in re.finditer(r"\d+(?:\.\d+)?|\.\d+", cell):
            v = float(m.group())
            values |= {v, v * 100} if v <= 1 else {v}
    return values


def typed_prose_numbers(nb, allowed: set[float]) -> list[str]:
    """Result-like numbers (decimals, percentages, signed values) typed in a notebook's
    prose that are neither glued nor a number the paper gives (``allowed``, at the precision
    shown) nor one of the :data:`CONVENTIONS`: ours must be glued from the rows, and a number
    derived from the paper's (a difference, a ratio) computed where the chapter reads the
    paper's table."""
    problems = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        text = cell.source
        for pattern in PROSE_SKIPS:
            text = pattern.sub(" ", text)
        for m in RESULT_NUMBER.finditer(text):
            sign, number, percent = m.group(1) or "", m.group(2), (m.group(3) or "").strip()
            shown = f"{sign}{number}{percent}"
            if not (sign or percent or "." in number) or shown in CONVENTIONS:
                continue
            digits = len(number.split(".")[1]) if "." in number else 0
            if any(round(v, digits) == float(number) for v in allowed):
                continue
            around = " ".join(text[max(0, m.start() - 40) : m.end() + 20].split())
            problems.append(
                f"its prose types {shown} (\u2026{around}\u2026), which no computation gave: "
                "glue it from the chapter, or read it from data/paper"
            )
    return problems


def quoted_number_problems(build: Path) -> list[str]:
    """Pages whose executed notebook (in the build's jupyter cache) checked no statement of its
    prose, or quotes a glue key it never glued."""
    cache_dir = build / ".jupyter_cache"
    if not cache_dir.exists():
        return [
            f"no execution cache at {cache_dir}: cannot tell whether the chapters checked their numbers"
        ]
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_dir))
    # The newest cached execution of each source file is the one this build used.
    latest: dict[str, object] = {}
    for record in cache.list_cache_records():
        if record.uri not in latest or record.created > latest[record.uri].created:
            latest[record.uri] = record
    problems = []
    values: dict[str, dict[str, str]] = {}
    for record in cache.list_project_records():
        name = Path(record.uri).stem
        if Path(record.uri).parent.name != "notebooks":
            continue
        cached = latest.get(record.uri)
        if cached is None:
            problems.append(f"{name}: not executed in this build")
            continue
        executed = cache.get_cache_bundle(cached.pk).nb
        values[name] = glued_values(executed)
        count = checks_in_notebook(executed)
        if not count:
            problems.append(
                f"{name}: its check cell verified {count or 0} statements (is its guard stale?)"
            )
        problems += [f"{name}: {p}" for p in typed_figure_numbers(executed)]
        problems += [f"{name}: {p}" for p in typed_prose_numbers(executed, paper_numbers(name))]
        missing = missing_glue_keys(executed)
        if missing:
            problems.append(
                f"{name}: its prose quotes glue keys no cell glued: {', '.join(missing)}"
            )
    return problems + glued_differently(values)


def page_tables(pages: list[Path]):
    """Each (page, table) of the pages' main content, tables inside tables included."""
    from bs4 import BeautifulSoup

    for page in pages:
        main = BeautifulSoup(page.read_text(encoding="utf-8", errors="replace"), "html.parser").main
        if main is not None:
            for table in main.find_all("table"):
                yield page, table


def uncaptioned_tables(root: Path, pages: list[Path]) -> list[str]:
    """Tables with no caption: a reader who lands on one from a link, or skims, cannot tell
    what it is. A table that is the only one behind a toggle is captioned by the toggle's line
    (its ``summary``)."""
    problems = []
    for page, table in page_tables(pages):
        if table.find_parent("table") is not None or table.caption is not None:
            continue
        toggle = table.find_parent("details")
        summary = toggle.find("summary") if toggle is not None else None
        if summary is not None and summary.get_text(strip=True):
            if len(toggle.find_all("table")) - len(toggle.select("table table")) == 1:
                continue
        headers = " | ".join(th.get_text(strip=True) for th in table.select("th")[:4])
        problems.append(f"{page.relative_to(root)}: a table with no caption ({headers})")
    return problems


def misplaced_point_labels(root: Path, pages: list[Path]) -> list[str]:
    """Image maps whose figure is missing, or whose point labels ("... (n = 120); open its
    rows") stand where the figure's own words belong: its title, alt text or caption."""
    from bs4 import BeautifulSoup

    problems = []
    for page in pages:
        soup = BeautifulSoup(page.read_text(encoding="utf-8", errors="replace"), "html.parser")
        for link_map in soup.find_all("map", attrs={"data-figure": True}):
            name = link_map["data-figure"]
            figure = soup.find(id=name)
            img = figure.find("img") if figure is not None else None
            if img is None:
                problems.append(
                    f"{page.relative_to(root)}: a map of points for {name}, no such figure"
                )
                continue
            caption = figure.find("figcaption")
            own_words = {
                "title": " ".join(
                    filter(None, [figure.get("title"), img.get("title"), img.get("aria-label")])
                ),
                "alt text": img.get("alt") or "",
                "caption": caption.get_text(" ", strip=True) if caption is not None else "",
            }
            labels = {a.get("title") or a.get("alt") or "" for a in link_map.find_all("area")}
            for where, words in own_words.items():
                if any(label and label in words for label in labels):
                    problems.append(
                        f"{page.relative_to(root)}: {name}'s {where} is one of its points' labels"
                    )
    return problems


# Python's and pandas' spellings of nothing (a lower-case "none" is a word a cell may say)
RAW_VALUES = {"None", "nan", "NaN", "NaT", "null", "<NA>"}
# Four decimals on a number of 1 or more, or five on a fraction: a p of two significant
# digits (0.0044) is a format; 66.2123 seconds is not
LONG_DECIMAL = re.compile(r"^[+\-\u2212]?(?:[1-9][\d,]*\.\d{4,}|0?\.\d{5,})%?$")


def raw_values(root: Path, pages: list[Path]) -> list[str]:
    """Table cells that print a raw Python value (``None``, ``nan``, ``<NA>``) or a float no
    table formatter would give (:data:`LONG_DECIMAL`): the value escaped its formatting."""
    problems = []
    for page, table in page_tables(pages):
        header = " | ".join(th.get_text(strip=True) for th in table.select("th")[:3])
        for cell in table.find_all("td"):
            text = cell.get_text(" ", strip=True)
            if text in RAW_VALUES or LONG_DECIMAL.match(text):
                problems.append(
                    f"{page.relative_to(root)}: a table cell prints the raw value {text!r} "
                    f"(table: {header})"
                )
    return problems


NOT_RUN = re.compile(r"\b(?:not|never)(?: yet| been)? run\b", re.IGNORECASE)


def reader_names(matrix_csv: Path) -> dict[str, set[str]]:
    """Each reader with judged cells (``downloads/findings-matrix.csv``) -> the ways prose
    names it: its model id and its size (``1.5B``, ``135M``)."""
    import pandas as pd

    if not matrix_csv.exists():
        return {}
    frame = pd.read_csv(matrix_csv, dtype=str, keep_default_na=False)
    names = {}
    for reader in frame.loc[frame["status"] == "judged", "reader"].unique():
        model = reader.split(" (")[0]
        size = re.search(r"(\d+(?:\.\d+)?)([bm])\b", model, re.IGNORECASE)
        names[reader] = {model} | ({size.group(1) + size.group(2).upper()} if size else set())
    return names


def stale_not_run(root: Path, pages: list[Path]) -> list[str]:
    """Prose that says a reader was not run while that reader has judged cells in the
    matrix: a sentence written before its rows, never brought up to date."""
    from bs4 import BeautifulSoup

    names = reader_names(root / "downloads" / "findings-matrix.csv")
    problems = []
    for page in pages:
        main = BeautifulSoup(page.read_text(encoding="utf-8", errors="replace"), "html.parser").main
        if main is None:
            continue
        for el in main.find_all(["p", "li"]):
            if el.find_parent("table") is not None:
                continue
            text = " ".join(el.get_text(" ").split())
            for sentence in re.split(r"(?<=[.;:])\s", text):
                if not NOT_RUN.search(sentence):
                    continue
                named = [r for r, ways in names.items() if any(w in sentence for w in ways)]
                if named:
                    problems.append(
                        f"{page.relative_to(root)}: says {named[0]} was not run, but it has "
                        f"judged cells: \u201c{sentence[:120]}\u201d"
                    )
    return problems


FILTERS = ("condition=", "units=", "rows=")


def unfiltered_points(root: Path, pages: list[Path]) -> list[str]:
    """Points that open a whole store: a figure's clickable point (an image map's area) or a
    table cell's "rows" link into a sample browser without a filter of the claim's rows
    (its conditions, its paired units or its rows' keys)."""
    from bs4 import BeautifulSoup

    problems = []
    for page in pages:
        main = BeautifulSoup(page.read_text(encoding="utf-8", errors="replace"), "html.parser").main
        if main is None:
            continue
        points = main.find_all("area", href=True) + [
            a for a in main.select("td a[href]") if a.get_text(strip=True) == "rows"
        ]
        for point in points:
            href = point["href"]
            target, _, fragment = href.partition("#")
            if "downloads/" in target and not any(f in fragment for f in FILTERS):
                what = point.get("title") or point.find_parent("tr").get_text(" ", strip=True)
                problems.append(
                    f"{page.relative_to(root)}: a point opens the whole store {target} "
                    f"({' '.join(what.split())[:80]})"
                )
    return problems


def is_data_page(rel_path: str) -> bool:
    """A row browser or download (``downloads/``): a data page by design, exempt from the
    size rules of chapter pages."""
    return rel_path.lstrip("/").split("/", 1)[0] == "downloads"


def oversized_pages(root: Path, pages: list[Path]) -> list[str]:
    """Pages whose HTML is larger than a reader's page should be, and cells that print more
    text than anyone reads (a row dump): both mean data shown raw instead of summarised."""
    from bs4 import BeautifulSoup

    problems = []
    for page in pages:
        rel = page.relative_to(root)
        if is_data_page(rel.as_posix()):
            continue
        size = page.stat().st_size
        if size > MAX_PAGE_BYTES:
            problems.append(
                f"{rel}: the page's HTML is {size / 1e6:.1f} MB (limit {MAX_PAGE_BYTES / 1e6:g} "
                "MB): does a cell print its data?"
            )
        soup = BeautifulSoup(page.read_text(encoding="utf-8", errors="replace"), "html.parser")
        for output in soup.select("div.cell_output pre, div.output pre"):
            lines = output.get_text().count("\n") + 1
            if lines > MAX_OUTPUT_LINES:
                start = output.get_text()[:60].replace("\n", " ")
                problems.append(
                    f"{rel}: a cell prints {lines} lines (limit {MAX_OUTPUT_LINES}): {start!r}..."
                )
    return problems


def too_tall(height: int, url: str) -> list[str]:
    """A chapter page taller at 1400 px than anyone scrolls (row browsers exempt)."""
    if height <= MAX_PAGE_HEIGHT_PX or is_data_page(urlparse(url).path):
        return []
    return [
        f"the page is {height:,} px tall at 1400 px wide (limit {MAX_PAGE_HEIGHT_PX:,}): "
        "does a cell print its data?"
    ]


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # the browser moved on before a large sample browser was sent: not the book's fault
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = _Server(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        raise SystemExit(
            "check_book: needs chromium and chromedriver (Debian: apt-get install chromium "
            "chromium-driver); `make check-book` installs them"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_window_size(1400, 1000)  # the width a reader's laptop shows the book at
    # A long page's typesetting on a busy machine can take longer than selenium's 30 s
    driver.set_script_timeout(MATHJAX_WAIT_S)
    return driver


PAGE_STATE = """
const images = Array.from(document.images).map(img => ({src: img.currentSrc || img.src,
    ok: img.complete && img.naturalWidth > 0}));
const text = document.body ? document.body.innerText : "";
const math = document.querySelectorAll("mjx-container").length;
const hadMath = document.querySelectorAll(".math, .MathJax, mjx-container").length;
const root = document.documentElement;
const figures = Array.from(document.querySelectorAll("main figure"));
const uncaptioned = figures.filter(f => !f.querySelector("figcaption")).length;
const referenced = new Set(Array.from(document.querySelectorAll("main a[href^='#']"))
    .map(a => a.getAttribute("href").slice(1)));
const unreferenced = figures.filter(f => f.id && !referenced.has(f.id)).map(f => f.id);
const shown = Array.from(document.querySelectorAll("main figure img")).map(img => ({
    src: img.currentSrc || img.src, natural: img.naturalWidth, width: img.clientWidth}));
// A table that scrolls inside itself hides columns; text wider than the column (an unbroken
// inline literal) spills out of it. Code blocks (pre) scroll by design and are left out.
const hidden = Array.from(document.querySelectorAll("main article table"))
    .filter(t => t.scrollWidth > t.clientWidth + 2)
    .map(t => (t.querySelector("caption") || t).innerText.trim().slice(0, 60));
const article = document.querySelector("main article");
const column = article ? article.getBoundingClientRect().right : Infinity;
const spills = Array.from(document.querySelectorAll("main article p, main article li, main article code.literal"))
    .filter(e => !e.closest("pre, table") && e.getBoundingClientRect().right > column + 2)
    .map(e => e.innerText.trim().slice(0, 60));
const headers = Array.from(document.querySelectorAll("main th"))
    .map(th => th.innerText.trim()).filter(t => t.length);
return {images: images, text: text, math: math, hadMath: hadMath,
        mathjax: typeof window.MathJax !== "undefined",
        overflow: root.scrollWidth - root.clientWidth, height: root.scrollHeight,
        figures: figures.length,
        uncaptioned: uncaptioned, unreferenced: unreferenced, shown: shown, headers: headers,
        hidden: hidden, spills: spills};
"""


def too_wide(hidden: list[str], spills: list[str]) -> list[str]:
    """Tables whose columns are hidden at 1400 px (they scroll inside themselves) and text
    that runs past the column's right edge."""
    return [
        f"a table hides columns at 1400 px (it scrolls sideways): {h!r}; fewer or narrower "
        "columns, an interval in one cell"
        for h in hidden
    ] + [f"text runs past the column at 1400 px: {s!r}" for s in dict.fromkeys(spills)]


def image_dpi(root: Path, src: str) -> float | None:
    """The DPI a served or inline (``data:``) PNG was drawn at (its pHYs chunk), or None when
    it records none."""
    import base64
    import io

    from PIL import Image

    if src.startswith("data:"):
        source = io.BytesIO(base64.b64decode(src.split(",", 1)[1]))
    else:
        source = root / unquote(urlparse(src).path).lstrip("/")
        if not source.exists():
            return None
    with Image.open(source) as img:
        dpi = img.info.get("dpi")
    return float(dpi[0]) if dpi else None


def small_figures(root: Path, shown: list[dict]) -> list[str]:
    """Figures scaled down until their smallest text is below ``MIN_RENDERED_PT``."""
    problems = []
    for img in shown:
        if not img["natural"]:
            continue  # reported as not loaded
        dpi = image_dpi(root, img["src"])
        name = (
            "(inline)"
            if img["src"].startswith("data:")
            else unquote(urlparse(img["src"]).path).rsplit("/", 1)[-1][:16]
        )
        if dpi is None:
            problems.append(f"figure {name}: the PNG records no DPI, so its text size is unknown")
            continue
        # MIN_FONT_PT at dpi is MIN_FONT_PT * dpi / 72 image pixels, shown at width/natural
        # of that, and a CSS point is 96/72 CSS pixels.
        rendered = MIN_FONT_PT * dpi / 72 * img["width"] / img["natural"] * 72 / 96
        if rendered < MIN_RENDERED_PT - 0.05:
            problems.append(
                f"figure {name}: {img['natural']} px drawn at {dpi:.0f} dpi is shown {img['width']} px "
                f"wide, so its smallest text reads {rendered:.1f} pt (< {MIN_RENDERED_PT:g}): draw "
                f"it at most {COLUMN_INCHES} in wide"
            )
    return problems


MATHJAX_WAIT_S = 180


def check_page(driver, url: str, root: Path) -> list[str]:
    import time

    from selenium.common.exceptions import TimeoutException

    driver.get(url)
    # Wait for MathJax's typesetting promise when the page loads it.
    problems = []
    try:
        driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
                MathJax.startup.promise.then(() => done(true)).catch(() => done(false));
            } else { done(true); }""")
    except TimeoutException:
        problems.append(f"MathJax did not finish typesetting within {MATHJAX_WAIT_S} s")
    time.sleep(0.2)
    state = driver.execute_script(PAGE_STATE)
    problems += [f"image not loaded: {img['src']}" for img in state["images"] if not img["ok"]]
    visible = state["text"]
    if RAW_TEX.search(visible):
        snippet = RAW_TEX.search(visible)
        problems.append(
            f"raw TeX left in the page: ...{visible[max(0, snippet.start() - 40) : snippet.end() + 40]!r}..."
        )
    if state["hadMath"] and not state["math"]:
        problems.append("math on the page but no MathJax output")
    if state["overflow"] > 1:  # a wide table or figure scrolls inside itself, never the page
        problems.append(f"the page scrolls sideways by {state['overflow']} px at 1400 px wide")
    problems += too_wide(state["hidden"], state["spills"])
    problems += too_tall(state["height"], url)
    if state["uncaptioned"]:
        problems.append(f"{state['uncaptioned']} of {state['figures']} figures have no caption")
    problems += [f"figure {f} is never referenced in the text" for f in state["unreferenced"]]
    problems += small_figures(root, state["shown"])
    problems += [
        f"raw identifier in a table header: {h!r}"
        for h in sorted(set(state["headers"]))
        if RAW_HEADER.search(h)
    ]
    problems += [
        f"an interval split across two columns: {h!r} (give it as one column, value [low, high])"
        for h in sorted(set(state["headers"]))
        if SPLIT_INTERVAL.search(h)
    ]
    for entry in driver.get_log("browser"):
        if entry.get("level") == "SEVERE":
            problems.append(f"console error: {entry.get('message')}")
    return problems


FILTERED_LINK = re.compile(r'href="([^"#]+\.html)#(condition=[^"]+)"')
# A figure's linked point says how many rows it stands for: "... (n = 40); open its rows".
POINT_ROWS = re.compile(r'<area [^>]*href="[^"#]+\.html#(condition=[^"]+)"[^>]*\(n = (\d+)\)')


def filtered_links(pages: list[Path]) -> list[tuple[Path, str, str, int | None]]:
    """(page, target, fragment, rows expected) of every link that opens a sample browser
    filtered to a claim's or a figure point's rows (the findings page, the verdict boxes and
    the key figures link them); a figure's point expects exactly the rows it was drawn from."""
    out = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        expected = {f: int(n) for f, n in POINT_ROWS.findall(html.unescape(text))}
        for target, fragment in FILTERED_LINK.findall(text):
            fragment = html.unescape(fragment)  # an area's href is written escaped (&amp;)
            out.append((page, target, fragment, expected.get(fragment)))
    return out


def empty_filters(driver, base: str, root: Path, links) -> list[str]:
    """Links to a sample browser whose filter shows no row: the claim's conditions and the
    browser's condition words no longer agree."""
    import time

    problems, seen = [], set()
    for page, target, fragment, expected in links:
        url = (page.parent / target).resolve().relative_to(root).as_posix()
        if (url, fragment) in seen:
            continue
        seen.add((url, fragment))
        # A new fragment on the page already open would not reload it (the browser reads its
        # filter at load): leave it first.
        driver.get("about:blank")
        driver.get(f"{base}/{url}#{fragment}")
        time.sleep(0.1)
        count = driver.execute_script("return document.getElementById('count').textContent")
        shown = re.search(r"of (\d+) shown", count or "")
        if not shown or shown.group(1) == "0":
            problems.append(
                f"{page.relative_to(root).as_posix()}: the link to {url}#{fragment[:80]}... "
                f"shows no row ({count!r})"
            )
        elif expected is not None and int(shown.group(1)) != expected:
            problems.append(
                f"{page.relative_to(root).as_posix()}: a figure's point stands for {expected} "
                f"rows but its link to {url}#{fragment[:80]}... shows {shown.group(1)}"
            )
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html", default="_build/html", help="the built book")
    args = ap.parse_args(argv)
    root = Path(args.html).resolve()
    pages = sorted(
        p for p in root.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts
    )
    if not pages:
        print(
            f"check_book: no HTML pages under {root}; build the book first (make book)",
            file=sys.stderr,
        )
        return 1
    problems = (
        broken_links(root, pages)
        + uncaptioned_tables(root, pages)
        + misplaced_point_labels(root, pages)
        + raw_values(root, pages)
        + unfiltered_points(root, pages)
        + stale_not_run(root, pages)
        + oversized_pages(root, pages)
        + quoted_number_problems(root.parent)
    )
    server, base = serve(root)
    driver = browser()
    try:
        for page in pages:
            rel = page.relative_to(root).as_posix()
            problems += [f"{rel}: {p}" for p in check_page(driver, f"{base}/{rel}", root)]
        links = filtered_links(pages)
        problems += empty_filters(driver, base, root, links)
    finally:
        driver.quit()
        server.shutdown()
    problems += [
        f"a page asked for a missing file: {path}" for path in sorted(set(_QuietHandler.missing))
    ]
    if problems:
        print(f"check_book: {len(problems)} problem(s) in {len(pages)} pages:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(
        f"check_book: {len(pages)} pages loaded in headless Chromium: no console errors, every image loaded, "
        "math rendered, every internal link resolves and every external one is well formed, no page "
        "scrolls sideways at 1400 px, every figure has a caption, is referenced and is shown large "
        f"enough for {MIN_RENDERED_PT:g} pt text, no figure's title, alt text or caption is one "
        "of its points' labels, every table is captioned and none "
        "has a raw identifier for a header, a raw value in a cell or an interval split across "
        "columns, every point opens its claim's rows only, no sentence says a reader with "
        "judged cells was not run, no number is glued two ways on two pages, no chapter page "
        "dumps its data (HTML under "
        f"{MAX_PAGE_BYTES / 1e6:g} MB, under {MAX_PAGE_HEIGHT_PX:,} px tall, no cell printing "
        f"over {MAX_OUTPUT_LINES} lines), no figure types a number in its caption or alt text "
        "and no chapter's prose a result the rows or the papers did not give, "
        "every page "
        f"checked its prose and glued every number it quotes, and each of {len(links)} links "
        "to a claim's rows shows rows"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
