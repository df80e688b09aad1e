// The book's sample browser: one store's committed rows as a filterable, sortable table.
// Offline by design (no CDN, no fetch): the page carries its rows as JSON in
// <script id="rows" type="application/json">, so it also opens from a file:// copy.
(function () {
  "use strict";
  const PAGE = 50;
  const data = JSON.parse(document.getElementById("rows").textContent);
  const columns = data.columns;
  const rows = data.rows;
  const table = document.getElementById("samples");
  const count = document.getElementById("count");
  const filters = columns.map(() => "");
  let sortBy = -1, ascending = true, page = 0, shown = rows;

  function cell(value) {
    return value === null || value === undefined ? "" : String(value);
  }

  const fixed = data.fixed || {};

  // "field: value" pairs (";" between them, "||" between alternatives) match whole items of
  // a condition ("k: v; k: v"), or a field said once above the table.
  function pairsMatch(f, text) {
    const items = new Set(text.split("; ").map(s => s.trim()));
    return f.split("||").some(alternative => alternative.split(";").every(pair => {
      const p = pair.trim().toLowerCase();
      if (!p) return true;
      const field = p.split(":")[0].trim();
      const own = Object.keys(fixed).find(k => k.toLowerCase() === field);
      return items.has(p) || (own !== undefined && (own + ": " + fixed[own]).toLowerCase() === p);
    }));
  }

  // A figure's point may name its rows by key: &rows=key+key+... (only those rows show).
  const keys = data.keys || [];
  rows.forEach((row, i) => { row.key = keys[i]; });
  const named = new URLSearchParams(location.hash.slice(1)).get("rows");
  const only = named ? new Set(named.split(/[+ ]/).filter(Boolean)) : null;

  // A claim's link names its paired units: &units=id+id+... (only rows of those examples).
  const listed = new URLSearchParams(location.hash.slice(1)).get("units");
  const units = listed ? new Set(listed.split(/[+ ]/).filter(Boolean)) : null;
  const example = columns.indexOf("example");

  function matches(row) {
    if (only && !only.has(row.key)) return false;
    if (units && example >= 0 && !units.has(cell(row[example]))) return false;
    return filters.every((f, i) => {
      if (!f) return true;
      const text = cell(row[i]).toLowerCase();
      if (columns[i] === "condition" && /\w: /.test(f)) return pairsMatch(f, text);
      if (/^[<>]=?\s*-?[\d.]+$/.test(f) && row[i] !== null && row[i] !== "") {
        const value = Number(row[i]), limit = Number(f.replace(/^[<>]=?\s*/, ""));
        if (f.startsWith(">=")) return value >= limit;
        if (f.startsWith("<=")) return value <= limit;
        return f.startsWith(">") ? value > limit : value < limit;
      }
      return f.toLowerCase().split(/\s+/).every(word => text.includes(word));
    });
  }

  function refresh() {
    shown = rows.filter(matches);
    if (sortBy >= 0) {
      const numeric = shown.every(r => r[sortBy] === null || typeof r[sortBy] === "number");
      shown = shown.slice().sort((a, b) => {
        const x = a[sortBy], y = b[sortBy];
        const order = numeric ? (x ?? -Infinity) - (y ?? -Infinity) : cell(x).localeCompare(cell(y));
        return ascending ? order : -order;
      });
    }
    page = Math.min(page, Math.max(0, Math.ceil(shown.length / PAGE) - 1));
    draw();
  }

  function draw() {
    const body = table.tBodies[0];
    body.replaceChildren();
    for (const row of shown.slice(page * PAGE, (page + 1) * PAGE)) {
      const tr = body.insertRow();
      row.forEach((value, i) => {
        const td = tr.insertCell();
        td.textContent = cell(value);
        td.className = "col-" + columns[i].replace(/\W+/g, "-");
      });
      tr.addEventListener("click", () => tr.classList.toggle("open"));
    }
    const first = shown.length ? page * PAGE + 1 : 0;
    count.textContent = `rows ${first}-${Math.min((page + 1) * PAGE, shown.length)} of ` +
      `${shown.length} shown (${rows.length} in the store); click a row to read it whole`;
  }

  const head = table.createTHead();
  const names = head.insertRow();
  const inputs = head.insertRow();
  columns.forEach((name, i) => {
    const th = document.createElement("th");
    th.textContent = name;
    th.title = "sort";
    th.addEventListener("click", () => {
      ascending = sortBy === i ? !ascending : true;
      sortBy = i;
      names.querySelectorAll("th").forEach(t => t.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      refresh();
    });
    names.appendChild(th);
    const filter = document.createElement("th");
    const input = document.createElement("input");
    input.type = "search";
    input.placeholder = i === columns.indexOf("score") ? "e.g. < 1" : "filter";
    input.setAttribute("aria-label", "filter " + name);
    input.addEventListener("input", () => { filters[i] = input.value.trim(); page = 0; refresh(); });
    filter.appendChild(input);
    inputs.appendChild(filter);
  });
  table.createTBody();
  // A link may set filters in its address: #condition=field%3A%20value%3B%20... (the findings
  // page links each claim's rows this way); &rows= names rows by key and &units= the
  // examples (above).
  new URLSearchParams(location.hash.slice(1)).forEach((value, name) => {
    const i = columns.indexOf(name);
    if (i < 0) return;
    filters[i] = value.trim();
    inputs.cells[i].querySelector("input").value = filters[i];
  });
  document.getElementById("previous").addEventListener("click", () => {
    if (page > 0) { page -= 1; draw(); }
  });
  document.getElementById("next").addEventListener("click", () => {
    if ((page + 1) * PAGE < shown.length) { page += 1; draw(); }
  });
  refresh();
})();
