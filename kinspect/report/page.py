"""The report as one self-contained HTML page: the model's findings, charts and tables, the
Vega and Vega-Lite runtimes inlined (assets/), nothing fetched at view time.

Everything from the input reaches the page in one of two ways: as HTML text (escape.text), or
inside the chart data, JSON in a <script type="application/json"> element (escape.script_json)
that the page's script hands to Vega, which draws it as SVG text. The Content-Security-Policy
allows no network (default-src 'none') and runs only the page's own scripts (by their SHA-256),
so even a string that got past the escaping could not run."""

from __future__ import annotations

import base64
import hashlib
import re
from functools import lru_cache
from importlib import resources

from kinspect import __version__
from kinspect.report import vega
from kinspect.report.escape import script_json, text

ASSETS = ("vega.min.js", "vega-lite.min.js")
SEVERITY_ORDER = ("error", "warning", "info")
_SOURCE_MAP = re.compile(r"//# sourceMappingURL=\S*")

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1180px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}h3{font-size:1.05em}
.meta{color:#555}.note{color:#555;font-size:.9em;margin:.2em 0 .8em}
.finding{margin:.4em 0;padding:.4em .6em;border-left:4px solid #888;background:#fafafa}
.finding.error{border-color:#c62828}.finding.warning{border-color:#ef8f00}.finding.info{border-color:#1976d2}
.sev{font-weight:bold;text-transform:uppercase;font-size:.8em;margin-right:.5em}
.error .sev{color:#c62828}.warning .sev{color:#b26a00}.info .sev{color:#1976d2}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0 1em}
td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top;max-width:28em;overflow-wrap:anywhere}
th{background:#f0f0f0}code,.cmd{font-family:ui-monospace,monospace;font-size:.9em;overflow-wrap:anywhere}
.chart{margin:.5em 0 1.5em}.empty{color:#777;font-style:italic}nav a{margin-right:1em}
"""

SCRIPT = """
(function () {
  var charts = JSON.parse(document.getElementById("kinspect-charts").textContent);
  var views = {}, drawing = [];
  function rows(c) {  // the columns back into one row per point, series names in place of indexes
    var out = [];
    for (var i = 0; i < c.x.length; i++) {
      var row = {s: c.names[c.s[i]], x: c.x[i], y: c.y[i]};
      c.extra.forEach(function (key) { row[key] = c[key][i]; });
      out.push(row);
    }
    return out;
  }
  charts.forEach(function (chart) {
    var spec = vegaLite.compile(chart.spec).spec;
    var view = new vega.View(vega.parse(spec), {renderer: "svg", container: "#chart-" + chart.id, hover: true});
    view.insert("points", rows(chart.columns));
    views[chart.id] = view;
    drawing.push(view.runAsync());
  });
  window.kinspectViews = views;
  Promise.all(drawing).then(function () { document.body.setAttribute("data-drawn", String(charts.length)); },
                            function (e) { console.error("kinspect report: a chart could not be drawn: " + e); });
})();
"""


@lru_cache(maxsize=1)
def runtime() -> str:
    """The vendored Vega and Vega-Lite runtimes, as one script (source-map comments removed:
    a browser's developer tools would fetch them)."""
    parts = []
    for name in ASSETS:
        source = resources.files("kinspect.report").joinpath("assets", name).read_text(encoding="utf-8")
        source = _SOURCE_MAP.sub("", source)
        if "</script" in source.lower() or "<!--" in source:
            raise ValueError(f"{name} holds text that would end its <script> element")
        parts.append(source)
    return "\n;\n".join(parts)


def _hash(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode() + "'"


def render(model: dict, title: str = "kinspect report") -> str:
    charts = [c for s in model["sections"] for c in s["charts"] if c["series"]]
    data = script_json([{"id": c["id"], "spec": vega.spec(c), "columns": vega.columns(c)} for c in charts])
    scripts = [runtime(), SCRIPT]
    policy = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
              f"script-src 'unsafe-eval' {' '.join(_hash(s) for s in scripts)}")
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">",
             "<meta name=\"viewport\" content=\"width=device-width\">",
             f"<title>{text(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{text(title)}</h1>", _header(model), _nav(model), _findings(model)]
    for section in model["sections"]:
        parts.append(_section(section))
    parts.append(f"<script type=\"application/json\" id=\"kinspect-charts\">{data}</script>")
    parts += [f"<script>{s}</script>" for s in scripts]
    parts.append("</body></html>\n")
    return "".join(parts)


def _header(model: dict) -> str:
    lines = []
    if model["inputs"]:
        lines.append("Captures: " + ", ".join(f"<code>{text(i)}</code>" for i in model["inputs"])
                     + f"; {model['exchanges']} exchanges")
    if model["log_dir"]:
        lines.append(f"Log dir: <code>{text(model['log_dir'])}</code>")
    if model["span"]:
        lines.append(f"From {text(model['span'][0])} to {text(model['span'][1])} (UTC); charts in buckets of "
                     f"{model['bucket_s']:g} s")
    lines.append(f"Written by kinspect {text(__version__)}; every number comes from kinspect doctor, clients, "
                 f"decode --summary, validate and its storage readers")
    notices = "".join(f"<li>{text(n)}</li>" for n in model["notices"])
    return ("<div class=\"meta\">" + "<br>".join(lines) + "</div>"
            + (f"<h3>Notices</h3><ul class=\"notices\">{notices}</ul>" if notices else ""))


def _nav(model: dict) -> str:
    links = ["<a href=\"#findings\">Findings</a>"] + [
        f"<a href=\"#{text(s['id'])}\">{text(s['title'])}</a>" for s in model["sections"]]
    return "<nav>" + "".join(links) + "</nav>"


def _findings(model: dict) -> str:
    found = model["findings"]
    counts = ", ".join(f"{sum(1 for f in found if f['severity'] == s)} {s}" for s in SEVERITY_ORDER)
    total = model["findings_total"]
    out = [f"<section id=\"findings\"><h2>Findings ({total}: {counts})</h2>"]
    if not found:
        out.append("<p class=\"empty\">No findings.</p>")
    elif total > len(found):
        out.append(f"<p class=\"note\">The {len(found)} most severe are shown; kinspect doctor --json lists all.</p>")
    targets = {c["id"]: f"chart-{c['id']}" for s in model["sections"] for c in s["charts"]}
    targets.update({s["id"]: s["id"] for s in model["sections"] if s["id"] in ("clients", "schemas")})
    for f in found:
        target = targets.get(f["chart"])
        link = f" <a href=\"#{text(target)}\">chart</a>" if target else ""
        facts = "".join(f"<tr><th>{text(k)}</th><td>{text(v)}</td></tr>" for k, v in f["facts"])
        evidence = "".join(f"<li>{text(e['time'] or '-')} <span class=\"cmd\">{text(e['command'])}</span></li>"
                           for e in f["evidence"])
        out.append(f"<div class=\"finding {text(f['severity'])}\" id=\"{text(f['id'])}\">"
                   f"<span class=\"sev\">{text(f['severity'])}</span><b>[{text(f['check'])}]</b> "
                   f"<span class=\"summary\">{text(f['summary'])}</span>{link}"
                   f"<details><summary>facts and evidence</summary><table>{facts}</table>"
                   f"<ul class=\"evidence\">{evidence}</ul></details></div>")
    out.append("</section>")
    return "".join(out)


def _section(section: dict) -> str:
    out = [f"<section id=\"{text(section['id'])}\"><h2>{text(section['title'])}</h2>"]
    for chart in section["charts"]:
        out.append(f"<h3>{text(chart['title'])}</h3><p class=\"note\">{text(chart['note'])}</p>")
        if chart["series"]:
            out.append(f"<div class=\"chart\" id=\"chart-{text(chart['id'])}\" "
                       f"data-series=\"{len(chart['series'])}\" "
                       f"data-points=\"{sum(len(s['points']) for s in chart['series'])}\"></div>")
        else:
            out.append(f"<div class=\"chart empty\" id=\"chart-{text(chart['id'])}\">Nothing to draw.</div>")
    for table in section["tables"]:
        out.append(_table(table))
    out.append("</section>")
    return "".join(out)


def _table(table: dict) -> str:
    head = "".join(f"<th>{text(c)}</th>" for c in table["columns"])
    body = "".join("<tr>" + "".join(f"<td>{text(cell)}</td>" for cell in row) + "</tr>" for row in table["rows"])
    if not table["rows"]:
        body = f"<tr><td colspan=\"{len(table['columns'])}\" class=\"empty\">none</td></tr>"
    return (f"<h3>{text(table['title'])}</h3><table id=\"{text(table['id'])}\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")
