"""kinspect report's pages in a real browser: Debian's chromium, driven by Playwright.

Each page loads with no console error and no request but its own file; every chart holds the
series and points the library computed; a screenshot is written beside the test's files (its
path printed); names from a capture recorded with hostile client ids, group ids and topic names
(tests/lab/report_hostile.py, real clients against Apache Kafka) show as text and run nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCENARIO = REPO / "tests" / "data" / "doctor-scenario"
HOSTILE = REPO / "tests" / "data" / "report-hostile"
SAMPLE_LOGS = REPO / "samples" / "kafka-4.1.2" / "logs"


def kinspect(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


class Loaded:
    def __init__(self, page, console, requests):
        self.page, self.console, self.requests = page, console, requests

    def charts(self) -> dict:
        """Per chart: its rows' series names, its row count, and the SVG marks Vega drew."""
        return self.page.evaluate("""() => Object.fromEntries(Object.entries(window.kinspectViews).map(
            ([id, view]) => [id, {series: [...new Set(view.data('points').map(r => r.s))],
                                  rows: view.data('points').length,
                                  svg: document.querySelectorAll('#chart-' + id + ' svg').length,
                                  lines: document.querySelectorAll('#chart-' + id + ' .mark-line.role-mark path').length,
                                  symbols: document.querySelectorAll('#chart-' + id + ' .mark-symbol.role-mark path').length,
                                  bars: document.querySelectorAll('#chart-' + id + ' .mark-rect.role-mark path').length}]))""")


def load(browser, html: Path, shot: Path) -> Loaded:
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    console, requests = [], []
    page.on("console", lambda m: console.append((m.type, m.text)))
    page.on("pageerror", lambda e: console.append(("pageerror", str(e))))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(html.as_uri())
    page.wait_for_selector("body[data-drawn]", timeout=60_000)
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    return Loaded(page, console, requests)


def _quiet(loaded: Loaded, html: Path) -> None:
    assert [c for c in loaded.console if c[0] in ("error", "pageerror", "warning")] == []
    assert loaded.requests == [html.as_uri()]


def _expected_from_library(captures, port, log_dir=None) -> dict:
    """The model the library builds, in this process: what each chart must hold."""
    from kinspect.decode.pipeline import DecodeRun
    from kinspect.doctor.source import capture_records
    from kinspect.report.gather import Gathered
    from kinspect.report.model import build

    gathered = Gathered()
    for capture in captures:
        for record in capture_records(DecodeRun(str(capture), ports={port, 9092})):
            gathered.add(record)
    if log_dir is not None:
        gathered.log_dir(log_dir)
    gathered.finish()
    model = build(gathered, [str(c) for c in captures], str(log_dir) if log_dir else None)
    return {"gathered": gathered, "charts": {c["id"]: c for s in model["sections"] for c in s["charts"]}}


def test_the_doctor_scenario_report_draws_every_chart_with_the_librarys_numbers(browser, tmp_path):
    manifest = json.loads((SCENARIO / "manifest.json").read_text())
    html = tmp_path / "doctor-scenario.html"
    done = kinspect("report", "--port", manifest["port"], SCENARIO / "doctor-scenario.pcap", "--log-dir",
                    SCENARIO / "logs", "-o", html)
    assert done.returncode == 0, done.stderr
    loaded = load(browser, html, tmp_path / "doctor-scenario.png")
    _quiet(loaded, html)
    expected = _expected_from_library([SCENARIO / "doctor-scenario.pcap"], manifest["port"], SCENARIO / "logs")
    drawn = loaded.charts()
    charts = {k: c for k, c in expected["charts"].items() if c["series"]}
    assert set(drawn) == set(charts)
    assert loaded.page.get_attribute("body", "data-drawn") == str(len(charts))
    for chart_id, chart in charts.items():
        got = drawn[chart_id]
        assert got["svg"] == 1, chart_id
        assert got["series"] == [s["name"] for s in chart["series"] if s["points"]], chart_id
        assert got["rows"] == sum(len(s["points"]) for s in chart["series"]), chart_id
        if chart["mark"] == "line":
            assert got["lines"] == len(got["series"]), chart_id
            assert got["symbols"] == got["rows"], chart_id
        if chart["mark"] in ("bar", "histogram", "histograms"):
            assert got["bars"] == got["rows"], chart_id
    gathered = expected["gathered"]
    # the library's own numbers, as kinspect doctor and decode --summary give them
    lag = {f"{r['group']} {r['topic']}-{r['partition']}": len(r["series"]) for r in gathered.lag_rows}
    assert {s: drawn["lag"]["series"].count(s) for s in drawn["lag"]["series"]} == {s: 1 for s in lag}
    assert drawn["lag"]["rows"] == sum(lag.values())
    rebalance = next(f for f in gathered.findings if f["check"] == "rebalance")
    assert rebalance["group"] == "rebalance-app" and drawn["rebalance"]["series"] == ["rebalance-app"]
    assert drawn["rebalance"]["rows"] == len(rebalance["rounds"]) == rebalance["rebalances"] == 4
    answered = {r["api_name"]: r["answered"] for r in gathered.summary.rows()}
    histogram = loaded.page.evaluate("window.kinspectViews['latency-histogram'].data('points')")
    for api, n in answered.items():
        if n:
            assert sum(r["y"] for r in histogram if r["s"] == api) == n, api
    # one small histogram per API: a chart of its own, titled with its name, holding its bins
    cells = loaded.page.evaluate("""() => ({
        titles: [...document.querySelectorAll('#chart-latency-histogram .role-title-text')].map(t => t.textContent),
        bars: [...document.querySelectorAll('#chart-latency-histogram .mark-rect.role-mark')].map(
            g => g.querySelectorAll('path').length),
        axes: document.querySelectorAll('#chart-latency-histogram .role-axis-title').length})""")
    per_api = {s["name"]: len(s["points"]) for s in expected["charts"]["latency-histogram"]["series"]}
    assert sorted(per_api) == cells["titles"] == sorted(api for api, n in answered.items() if n)
    assert cells["bars"] == [per_api[api] for api in cells["titles"]]
    assert cells["axes"] == 2 * len(per_api)  # each chart its latency and its count axis
    summary = json.loads("[" + ",".join(kinspect("decode", "--summary", "--json", "--port", manifest["port"],
                                                 SCENARIO / "doctor-scenario.pcap").stdout.split()) + "]")
    requests = loaded.page.evaluate("window.kinspectViews['requests-by-api'].data('points')")
    width = float(loaded.page.evaluate("window.kinspectViews['requests-by-api'].data('points').length") and
                  expected["gathered"].timeline.width)
    for row in (r for r in summary if r.get("type") == "summary"):
        assert round(sum(r["y"] for r in requests if r["s"] == row["api_name"]) * width) == row["count"]
    # findings at the top, each linking to its chart
    findings = loaded.page.locator(".finding")
    assert findings.count() == len(gathered.findings) == 10
    lag_link = loaded.page.locator(".finding:has-text('[lag]') a").get_attribute("href")
    assert lag_link == "#chart-lag" and loaded.page.locator(lag_link).count() == 1


def test_hostile_names_show_as_text_and_run_nothing(browser, tmp_path):
    manifest = json.loads((HOSTILE / "manifest.json").read_text())
    html = tmp_path / "hostile.html"
    title = "</title><script>window.pwned=5</script>\x1b[31m"
    done = kinspect("report", "--port", manifest["port"], HOSTILE / manifest["capture"], "--title", title, "-o", html)
    assert done.returncode == 0, done.stderr
    loaded = load(browser, html, tmp_path / "hostile.png")
    _quiet(loaded, html)
    page = loaded.page
    assert page.evaluate("window.pwned") is None
    assert page.locator("#pwned").count() == 0 and page.locator("img").count() == 0
    assert page.locator("script").count() == 3  # the chart data and the page's two scripts
    assert page.title() == title.replace("\x1b", "\\x1b")

    from kinspect.report.escape import shown

    clients = page.locator("#client-table tbody tr td:first-child").all_text_contents()
    assert sorted(clients) == sorted(shown(c) for c in manifest["client_ids"])
    errors = page.locator("#error-table").inner_text()
    for topic in manifest["refused_topics"]:
        assert shown(topic) in errors
    groups = page.locator("#lag-table tbody tr td:first-child").all_text_contents()
    assert sorted(set(groups)) == sorted(shown(g) for g in manifest["group_ids"])
    legend = " ".join(page.locator("#chart-lag svg text").all_text_contents())
    for group in manifest["group_ids"]:  # Vega's SVG text, shortened past its label limit
        assert shown(group)[:20] in legend


def test_a_log_dir_report_shows_its_storage_and_validates_findings(browser, tmp_path):
    html = tmp_path / "logdir.html"
    done = kinspect("report", "--log-dir", SAMPLE_LOGS, "-o", html)
    assert done.returncode == 0, done.stderr
    loaded = load(browser, html, tmp_path / "logdir.png")
    _quiet(loaded, html)
    page = loaded.page
    drawn = loaded.charts()
    assert set(drawn) == {"partition-sizes", "batch-sizes", "codecs", "timestamps"}
    sizes = {r["x"]: r["y"] for r in page.evaluate("window.kinspectViews['partition-sizes'].data('points')")}
    on_disk = {d.name: sum(f.stat().st_size for f in d.glob("*.log")) for d in SAMPLE_LOGS.iterdir() if d.is_dir()}
    assert sizes == on_disk
    codecs = {r["x"]: r["y"] for r in page.evaluate("window.kinspectViews['codecs'].data('points')")}
    assert {"gzip", "lz4", "snappy", "zstd", "none"} <= set(codecs)
    dump = [json.loads(line) for line in kinspect("dump", "--json", SAMPLE_LOGS).stdout.splitlines()]
    batches = [e for e in dump if e.get("type") == "batch" and str(e.get("file", "")).endswith(".log")] or \
        [e for e in dump if e.get("type") == "batch"]
    assert sum(codecs.values()) == len(batches)
    batch_sizes = page.evaluate("window.kinspectViews['batch-sizes'].data('points')")
    assert sum(r["y"] for r in batch_sizes) == len(batches)
    from kinspect.report.logdir import read_log_dir
    from kinspect.report.timeline import MAX_SERIES

    largest = sorted(read_log_dir(SAMPLE_LOGS).partitions, key=lambda p: -p.log_bytes)[:MAX_SERIES]
    assert drawn["timestamps"]["series"] == [p.name for p in largest if p.points]
    stamps = page.evaluate("window.kinspectViews['timestamps'].data('points')")
    for p in largest:  # every batch's (last offset, max timestamp), as dump gives them
        assert sorted((r["x"], r["y"]) for r in stamps if r["s"] == p.name) == sorted(
            (b["last_offset"], b["max_timestamp"]) for b in batches
            if Path(b["file"]).parent.name == p.name and b["max_timestamp"] != -1)
    validated = [json.loads(line) for line in kinspect("validate", "--json", SAMPLE_LOGS).stdout.splitlines()]
    findings = [v for v in validated if v.get("type") == "finding"]
    rows = page.locator("#validate-table tbody tr").all_inner_texts()
    assert findings and len(rows) == len(findings)
    for finding in findings:
        assert any(finding["check"] in row and finding["what"] in row for row in rows)
