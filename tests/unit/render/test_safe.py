"""Text from the input made safe to print: escapes, rich styles kept, file names, bytes."""

from __future__ import annotations

import os

from rich.text import Text

from kinspect.render.safe import escape, escape_text, path_text, text_of


def test_control_characters_del_and_c1_are_escaped():
    assert escape("a\x1b[2Jb\x07\x7f\x9b\x00") == "a\\x1b[2Jb\\x07\\x7f\\x9b\\x00"
    assert escape("tab\tnew\nret\r") == "tab\\tnew\\nret\\r"
    assert escape("ordinary text, ünïcödé, 漢字 — and a backslash \\") == \
        "ordinary text, ünïcödé, 漢字 — and a backslash \\"
    assert all(len(escape(chr(c))) == 4 for c in [*range(0x20), *range(0x7f, 0xa0)]
               if chr(c) not in "\t\n\r")


def test_lone_surrogates_are_escaped():
    assert escape(b"caf\xe9".decode("utf-8", "surrogateescape")) == "caf\\xe9"
    assert escape("x\ud800y") == "x\\ud800y"


def test_escape_text_keeps_each_span_on_what_its_characters_became():
    # (rich itself drops BEL, BS, VT, FF and CR from a Text: renderers escape before that)
    text = Text.assemble(("12:00", "dim"), "  ", ("cli\x1bent", "magenta"), " tail\x9b")
    escaped = escape_text(text)
    assert escaped.plain == "12:00  cli\\x1bent tail\\x9b"
    styles = {escaped.plain[s.start:s.end]: str(s.style) for s in escaped.spans}
    assert styles == {"12:00": "dim", "cli\\x1bent": "magenta"}


def test_escape_text_leaves_clean_text_as_it_is():
    text = Text.assemble(("ok", "green"), " fine")
    assert escape_text(text) is text


def test_path_text_shows_bytes_that_are_not_utf8():
    name = os.fsdecode(b"/tmp/caf\xe9/\xff.log")
    assert path_text(name) == "/tmp/caf\\xe9/\\xff.log"
    assert path_text(b"/x/\xfe.log") == "/x/\\xfe.log"
    assert path_text("/ordinary/ünï.log") == "/ordinary/ünï.log"
    assert path_text("odd\ud800") == "odd\\ud800"


def test_text_of_bytes_a_decoder_kept():
    assert text_of(b"grp-\xff") == "grp-\\xff"
    assert text_of("grp") == "grp" and text_of(12) == "12"


def test_layout_keeps_the_tabs_and_newlines_kinspect_lays_text_out_with():
    assert escape("\nfile\tname\x1b[2J\r", layout=True) == "\nfile\tname\\x1b[2J\\r"
    text = Text.assemble("\n", ("name\x1b", "bold"))
    assert escape_text(text, layout=True).plain == "\nname\\x1b"
