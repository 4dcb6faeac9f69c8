"""The frame every report page shares: one self-contained HTML document.

Styles and the case-table script are inlined; nothing is fetched (no CDN, no font, no image by
address), so a page opens from a `file://` URL, from the store, or behind `assay serve`, and
prints to PDF (sections avoid page breaks inside, the filters are not printed). Every text
that comes from a record goes through `text()`: escaped, and clamped like a label.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable, Sequence
from typing import Final

from assay.scorers import clamp

LABEL_CHARS = 120
"""Longest text a report shows from a record (case ids, labels, reasons, subjects)."""

_STYLE = """
:root { --ink:#1a1a1a; --muted:#555; --line:#d0d0d0; --pass:#009E73; --fail:#D55E00;
  --skip:#666; --bg:#fff; --band:#f4f6f8; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
  background: var(--bg); margin: 0 auto; max-width: 1400px; padding: 24px 32px; }
h1 { font-size: 1.6rem; margin: 0 0 4px; } h2 { font-size: 1.2rem; margin: 28px 0 8px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.sub { color: var(--muted); margin: 0 0 16px; }
.verdict { font-size: 1.25rem; font-weight: 600; padding: 10px 14px; border-left: 6px solid;
  background: var(--band); margin: 8px 0 16px; }
.verdict.ok { border-color: var(--pass); } .verdict.bad { border-color: var(--fail); }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(220px, 1fr)); gap: 8px;
  margin: 0 0 8px; }
.figure { background: var(--band); padding: 8px 12px; }
.figure b { display: block; font-size: .8rem; color: var(--muted); font-weight: 500; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(620px, 1fr)); gap: 16px; }
svg.chart { width: 100%; max-width: 900px; height: auto; }
section { break-inside: avoid; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { text-align: left; padding: 3px 10px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { font-weight: 600; background: var(--band); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass { color: var(--pass); font-weight: 600; } .fail, .error { color: var(--fail);
  font-weight: 600; } .skipped { color: var(--skip); font-weight: 600; }
#cases { width: 100%; } #cases td { overflow-wrap: anywhere; }
#cases td:last-child { max-width: 360px; }
#cases i { display: inline-block; margin: 1px 8px 1px 0; font-style: normal; }
#cases b.t { display: inline-block; min-width: 2.4em; margin: 1px 2px 1px 0; padding: 0 3px;
  border: 1px solid currentColor; border-radius: 3px; font-size: .8rem; text-align: center; }
#cases b.t.pass { background: #e3f4ee; } #cases b.t.fail, #cases b.t.error {
  background: #fbe6dc; } #cases b.t.skipped { background: #eee; }
#cases b.t.missing { border-style: dashed; }
#cases td:nth-child(3), #cases th:nth-child(3) { text-align: right;
  font-variant-numeric: tabular-nums; }
.note { color: var(--muted); font-size: .9rem; }
.filters { display: flex; gap: 12px; flex-wrap: wrap; margin: 6px 0; align-items: center; }
.filters label { font-size: .9rem; }
ul { margin: 4px 0 12px; }
@media print { .filters { display: none; } body { padding: 0; max-width: none; }
  .charts { grid-template-columns: 1fr; } }
"""

_SCRIPT = """
(function () {
  var table = document.getElementById('cases');
  if (!table) { return; }
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  var status = document.getElementById('f-status');
  var kind = document.getElementById('f-kind');
  var tag = document.getElementById('f-tag');
  var search = document.getElementById('f-search');
  var shown = document.getElementById('f-shown');
  function has(list, value) { return (' ' + list + ' ').indexOf(' ' + value + ' ') >= 0; }
  function apply() {
    var count = 0;
    var needle = search.value.trim().toLowerCase();
    rows.forEach(function (row) {
      var ok = (!status.value || row.dataset.s === status.value)
        && (!kind.value || has(row.dataset.k, kind.value))
        && (!tag.value || has(row.cells[3].textContent, tag.value))
        && (!needle || row.dataset.caseId.toLowerCase().indexOf(needle) >= 0);
      row.hidden = !ok;
      if (ok) { count += 1; }
    });
    shown.textContent = count + ' of ' + rows.length + ' cases shown';
  }
  [status, kind, tag].forEach(function (el) { el.addEventListener('change', apply); });
  search.addEventListener('input', apply);
  // `#status=fail&kind=regex&tag=returns&id=refund`: a link to the filtered table.
  var given = {};
  location.hash.replace(/^#/, '').split('&').forEach(function (pair) {
    var parts = pair.split('=');
    if (parts.length === 2) { given[parts[0]] = decodeURIComponent(parts[1]); }
  });
  [[status, 'status'], [kind, 'kind'], [tag, 'tag'], [search, 'id']].forEach(function (p) {
    if (given[p[1]] !== undefined) { p[0].value = given[p[1]]; }
  });
  apply();
})();
"""


CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    f"script-src 'sha256-{base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()}';"
    " "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
)
"""What a served page may do: its own inline style, data: images and its one script (by hash),
nothing fetched, nothing posted, not framed by another site."""


def text(value: object, limit: int = LABEL_CHARS) -> str:
    """A record's text as HTML: clamped to `limit` characters, then escaped."""
    return html.escape(clamp(str(value), limit), quote=True)


def document(title: str, body: Iterable[str]) -> str:
    """The whole page: `body`'s pieces inside the shared frame, the case-table script last."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{_STYLE}</style></head><body>"
        + "".join(body)
        + f"<script>{_SCRIPT}</script></body></html>\n"
    )


def section(heading: str, *parts: str, anchor: str = "") -> str:
    """A titled part of the page (`anchor`: its id)."""
    ident = f' id="{anchor}"' if anchor else ""
    return f"<section{ident}><h2>{text(heading)}</h2>{''.join(parts)}</section>"


def figures(pairs: Sequence[tuple[str, str]]) -> str:
    """Key figures as tiles: (name, value) pairs, both plain text."""
    tiles = "".join(f'<div class="figure"><b>{text(k)}</b>{text(v)}</div>' for k, v in pairs)
    return f'<div class="figures">{tiles}</div>'


def charts(svgs: Iterable[str]) -> str:
    """Charts side by side where the page is wide enough."""
    return f'<div class="charts">{"".join(f"<div>{svg}</div>" for svg in svgs)}</div>'


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], numeric: int = 0) -> str:
    """A plain table; the last `numeric` columns are right-aligned figures."""
    first_numeric = len(headers) - numeric

    def cell(tag: str, i: int, value: object) -> str:
        align = ' class="num"' if i >= first_numeric else ""
        return f"<{tag}{align}>{text(value)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def bullets(lines: Iterable[str]) -> str:
    """A list of plain-text lines (empty: nothing)."""
    items = "".join(f"<li>{text(line, 400)}</li>" for line in lines)
    return f"<ul>{items}</ul>" if items else ""


def note(line: str) -> str:
    """A muted line of plain text."""
    return f'<p class="note">{text(line, 400)}</p>'
