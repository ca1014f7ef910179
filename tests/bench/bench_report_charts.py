"""Which chart library the report embeds (not a test): Vega-Lite, plotly and matplotlib SVG.

    python tests/bench/bench_report_charts.py                # 100,000 points, 3 renders each
    python tests/bench/bench_report_charts.py --points 20000 --repeat 5

For each candidate, one self-contained page (its runtime inlined, no network) holding one line
chart of N points on a UTC time axis: the page's weight, the time to build it in Python, and the
time headless Chromium (Debian's, driven by Playwright) takes from navigation to the chart drawn
(the library's own "rendered" promise; the load event for the static SVG). A screenshot of each
goes to tests/bench/results/report-charts-<library>.png. The numbers are printed and written to
tests/bench/results/report-charts-<date>.json (and .md).

- Vega-Lite: altair builds the spec; vega, vega-lite and vega-embed are inlined (vl-convert's
  bundle, as altair's save(inline=True) does); canvas renderer.
- Vega-Lite as kinspect report writes it: the spec a plain dict, kinspect/report/assets' vega and
  vega-lite inlined, the rows as JSON in a data element; SVG and canvas renderers.
- plotly: plotly.min.js from the Python package, inlined; scattergl (WebGL) and scatter (SVG).
- matplotlib: the figure as inline SVG, drawn on the server.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.measure import machine_facts  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CHROMIUM = "/usr/bin/chromium"
START = 1_764_288_000.0  # 2025-11-28T00:00:00Z


def series(points: int) -> tuple[list[float], list[float]]:
    times = [START + i * 0.05 for i in range(points)]
    values = [5 + 4 * math.sin(i / 500) + (i % 97) / 50 for i in range(points)]
    return times, values


def vega_lite(times, values) -> str:
    import altair as alt

    alt.data_transformers.disable_max_rows()
    data = alt.Data(values=[{"t": t * 1000, "v": v} for t, v in zip(times, values)])
    chart = alt.Chart(data).mark_line().encode(
        x=alt.X("t:T", scale=alt.Scale(type="utc"), title="time (UTC)"),
        y=alt.Y("v:Q", title="latency (ms)")).properties(width=900, height=300)
    html = chart.to_html(inline=True, embed_options={"renderer": "canvas"})
    return html.replace("vegaEmbed('#vis', spec, embedOpt)",
                        "vegaEmbed('#vis', spec, embedOpt).then(() => { window.__drawn = performance.now(); })")


def vega_lite_vendored(times, values) -> str:
    """What kinspect report does: the spec as a plain dict (no altair), the vendored runtime."""
    from kinspect.report.escape import script_json
    from kinspect.report.page import runtime

    spec = {"width": 900, "height": 300, "data": {"name": "points"}, "mark": "line",
            "encoding": {"x": {"field": "x", "type": "temporal", "scale": {"type": "utc"}, "title": "time (UTC)",
                               "axis": {"format": "%H:%M"}},
                         "y": {"field": "y", "type": "quantitative", "title": "latency (ms)"}}}
    rows = [{"x": t * 1000, "y": v} for t, v in zip(times, values)]
    return ("<!doctype html><html><head><meta charset='utf-8'></head><body><div id='c'></div>"
            "<script type='application/json' id='d'>" + script_json({"spec": spec, "rows": rows}) + "</script>"
            "<script>" + runtime() + "</script><script>var d = JSON.parse(document.getElementById('d').textContent);"
            "var v = new vega.View(vega.parse(vegaLite.compile(d.spec).spec), {renderer: 'svg', container: '#c'});"
            "v.insert('points', d.rows); v.runAsync().then(() => { window.__drawn = performance.now(); });"
            "</script></body></html>")


def vega_lite_vendored_canvas(times, values) -> str:
    return vega_lite_vendored(times, values).replace("renderer: 'svg'", "renderer: 'canvas'")


def _plotly(times, values, kind: str) -> str:
    from plotly.offline import get_plotlyjs

    figure = {"data": [{"type": kind, "mode": "lines", "x": [t * 1000 for t in times], "y": values}],
              "layout": {"width": 900, "height": 300, "xaxis": {"type": "date", "title": {"text": "time (UTC)"}},
                         "yaxis": {"title": {"text": "latency (ms)"}}}}
    return ("<!doctype html><html><head><meta charset='utf-8'><script>" + get_plotlyjs() + "</script></head>"
            "<body><div id='c'></div><script>var f = " + json.dumps(figure) + ";"
            "Plotly.newPlot('c', f.data, f.layout).then(() => { window.__drawn = performance.now(); });"
            "</script></body></html>")


def plotly_gl(times, values) -> str:
    return _plotly(times, values, "scattergl")


def plotly_svg(times, values) -> str:
    return _plotly(times, values, "scatter")


def matplotlib_svg(times, values) -> str:
    import io
    from datetime import datetime, timezone

    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 3))
    axes.plot([datetime.fromtimestamp(t, timezone.utc) for t in times], values, linewidth=0.8)
    axes.set_xlabel("time (UTC)")
    axes.set_ylabel("latency (ms)")
    out = io.StringIO()
    figure.savefig(out, format="svg")
    plt.close(figure)
    svg = out.getvalue()
    svg = svg[svg.index("<svg"):]
    return ("<!doctype html><html><head><meta charset='utf-8'></head><body>" + svg +
            "<script>window.addEventListener('load', () => { window.__drawn = performance.now(); });"
            "</script></body></html>")


CANDIDATES = {"vega-lite": vega_lite, "vega-lite-vendored-svg": vega_lite_vendored,
              "vega-lite-vendored-canvas": vega_lite_vendored_canvas, "plotly-webgl": plotly_gl, "plotly-svg": plotly_svg,
              "matplotlib-svg": matplotlib_svg}


def render(browser, page_path: Path, shot: Path | None) -> tuple[float, int, int]:
    """(ms from navigation to drawn, console errors, requests other than the page)."""
    page = browser.new_page(viewport={"width": 1000, "height": 400})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("request", lambda r: requests.append(r.url) if r.url != page_path.as_uri() else None)
    page.goto(page_path.as_uri())
    page.wait_for_function("window.__drawn !== undefined", timeout=120_000)
    drawn = page.evaluate("window.__drawn")
    if shot is not None:
        page.screenshot(path=str(shot))
    page.close()
    return drawn, len(errors), len(requests)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    times, values = series(args.points)
    rows = []
    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for name, build in CANDIDATES.items():
            began = time.perf_counter()
            html = build(times, values)
            built = time.perf_counter() - began
            page_path = Path(scratch) / f"{name}.html"
            page_path.write_text(html, encoding="utf-8")
            renders = []
            for r in range(args.repeat):
                shot = RESULTS / f"report-charts-{name}.png" if r == 0 else None
                renders.append(render(browser, page_path, shot))
            rows.append({"library": name, "points": args.points, "page_bytes": page_path.stat().st_size,
                         "build_s": round(built, 3),
                         "render_ms_median": round(statistics.median(r[0] for r in renders)),
                         "render_ms": [round(r[0]) for r in renders],
                         "console_errors": max(r[1] for r in renders), "requests": max(r[2] for r in renders)})
            print(json.dumps(rows[-1]), flush=True)
        browser.close()
    stamp = time.strftime("%Y%m%d-%H%M", time.gmtime())
    result = {"machine": machine_facts(), "chromium": CHROMIUM, "rows": rows}
    (RESULTS / f"report-charts-{stamp}.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = ["| library | points | page bytes | build s | render ms (median) | console errors | requests |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['library']} | {r['points']} | {r['page_bytes']:,} | {r['build_s']} | {r['render_ms_median']} "
              f"| {r['console_errors']} | {r['requests']} |" for r in rows]
    (RESULTS / f"report-charts-{stamp}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
