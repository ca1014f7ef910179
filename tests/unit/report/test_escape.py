"""The input's text in HTML and inside <script>: inert whatever it holds."""

import json
from html.parser import HTMLParser

from kinspect.report.escape import script_json, shown, text

HOSTILE = ["<script>alert(1)</script>", "</title><h1>x", "</script><script>alert(2)</script>",
           "\"quoted' & <!-- -->", "\x1b[31mred\x1b[0m\x07", "line\u2028sep\u2029para", b"\xff\xfe<b>"]


def test_text_leaves_no_markup_and_shows_control_characters():
    for value in HOSTILE:
        escaped = text(value)
        assert "<" not in escaped and ">" not in escaped and '"' not in escaped and "'" not in escaped
        assert "\x1b" not in escaped and "\x07" not in escaped
    assert text("<script>") == "&lt;script&gt;"
    assert text("\x1b[31m") == "\\x1b[31m"
    assert shown(b"\xff<") == "\\xff<"


def test_script_json_cannot_end_its_element_and_parses_back():
    data = {"names": HOSTILE[:-1], "nested": [{"k": v} for v in HOSTILE[:-1]]}
    encoded = script_json(data)
    for unsafe in ("<", ">", "&", "\u2028", "\u2029"):
        assert unsafe not in encoded
    assert json.loads(encoded) == data


class _Scripts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self.inside = [], False

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self.scripts.append("")
            self.inside = True

    def handle_endtag(self, tag):
        if tag == "script":
            self.inside = False

    def handle_data(self, data):
        if self.inside:
            self.scripts[-1] += data


def test_script_json_inside_a_script_element_stays_one_element():
    page = f"<script type=\"application/json\">{script_json(HOSTILE[:-1])}</script>"
    parser = _Scripts()
    parser.feed(page)
    assert len(parser.scripts) == 1
    assert json.loads(parser.scripts[0]) == HOSTILE[:-1]


def test_bytes_become_their_shown_text_in_json():
    assert json.loads(script_json({"b": b"\xff<x>"})) == {"b": "\\xff<x>"}


def test_a_long_value_is_cut_and_the_rest_counted():
    assert shown("a" * 10, longest=4) == "aaaa… (6 more characters)"
    assert shown("\x1b" * 10, longest=4) == "\\x1b… (6 more characters)"
    assert shown("abcd", longest=4) == "abcd"
