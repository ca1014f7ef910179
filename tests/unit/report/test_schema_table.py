"""The report's "values by schema" table: decode --summary's counts, as they are (the page
computes nothing of its own), and subject names that are HTML shown as text."""

from __future__ import annotations

from html import unescape
from html.parser import HTMLParser

from kinspect.report.escape import shown
from kinspect.report.model import SUBJECT
from tests.hostile.inputs_report_schemas import html_subjects, subject
from tests.unit.decode.test_schema_counts import schema_dir
from tests.unit.schemas.fixtures import CAPTURE, json_lines, kinspect


class _Page(HTMLParser):
    """The cells of one table (by id), the scripts, and every element's tag."""

    def __init__(self, table_id: str):
        super().__init__()
        self.table_id, self.rows, self.scripts, self.tags = table_id, [], 0, []
        self._in_table = self._in_body = False
        self._cell = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "table":
            self._in_table = attrs.get("id") == self.table_id
        elif self._in_table and tag == "tbody":
            self._in_body = True
        elif self._in_table and self._in_body and tag == "tr":
            self.rows.append([])
        elif self._in_table and self._in_body and tag == "td":
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1].append(self._cell)
            self._cell = None
        elif tag == "table":
            self._in_table = self._in_body = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def _page(path) -> tuple[str, _Page]:
    html = path.read_text(encoding="utf-8")
    page = _Page("schema-table")
    page.feed(html)
    return html, page


def _summary_cells(*args) -> list[list[str]]:
    done = kinspect("decode", "--summary", "--json", *args)
    assert done.returncode == 0, done.stderr
    return [[shown(v, SUBJECT if at == 2 else 300) if v is not None else "-" for at, v in enumerate((
        r["api_name"], r["side"], r["subject"], r["id"] if r["id"] is not None else r["guid"], r["format"],
        r["records"], r["decoded"], r["unknown"], r["failed"]))]
        for r in json_lines(done.stdout) if r["type"] == "summary_schema"]


def test_the_table_is_decode_summarys_counts(tmp_path):
    args = ("--schemas", schema_dir(tmp_path / "schemas"), "--schemas-topic", "nope", CAPTURE)
    out = tmp_path / "report.html"
    done = kinspect("report", *args, "-o", out)
    assert done.returncode == 0, done.stderr
    html, page = _page(out)
    assert page.rows == _summary_cells(*args)
    assert {row[-1] for row in page.rows} >= {"2"} and {row[-2] for row in page.rows} >= {"6", "24"}
    # doctor's schemas findings link to the table's section
    assert "[schemas]</b>" in html and '<a href="#schemas">chart</a>' in html


def test_no_table_without_framed_values(tmp_path):
    out = tmp_path / "report.html"
    done = kinspect("report", "--raw-values", CAPTURE, "-o", out)
    assert done.returncode == 0, done.stderr
    html, page = _page(out)
    assert page.rows == [] and 'id="schemas"' not in html


def test_subjects_that_are_html_show_as_text(tmp_path):
    capture = html_subjects(tmp_path, 3)
    out = tmp_path / "report.html"
    done = kinspect("report", capture, "-o", out)
    assert done.returncode == 0, done.stderr
    html, page = _page(out)
    assert "<script>alert" not in html and "</td><script>" not in html
    assert page.scripts == 3  # the chart data, the runtime, the page's script: none from a subject
    subjects = sorted(row[2] for row in page.rows if row[2] != "-")
    assert subjects == [shown(subject(i), SUBJECT) for i in (1, 2, 3)]
    assert all(s.startswith("</td><script>alert(") and "\\x1b[31m" in s for s in subjects)
    assert [row[5:] for row in page.rows if row[2] != "-"] == [["2", "1", "0", "1"]] * 3
    assert [row[3:] for row in page.rows if row[2] == "-"] == [["4", "-", "1", "0", "1", "0"]]


def test_the_runs_schema_notices_are_on_the_page_as_on_stderr(tmp_path):
    args = ("--schemas", schema_dir(tmp_path / "schemas"), "--schemas-topic", "nope", CAPTURE)
    out = tmp_path / "report.html"
    done = kinspect("report", *args, "-o", out)
    assert done.returncode == 0, done.stderr
    said = [line.removeprefix("kinspect: ") for line in done.stderr.splitlines() if "schema id" in line]
    assert said and all("is in no schema source" in line for line in said)
    html = out.read_text(encoding="utf-8")
    listed = html.split('<ul class="notices">', 1)[1].split("</ul>", 1)[0]
    items = [unescape(item.split("</li>", 1)[0]) for item in listed.split("<li>")[1:]]
    assert [item for item in items if "schema id" in item] == said
