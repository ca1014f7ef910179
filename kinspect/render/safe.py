"""Text from the input, made safe to print: a client id, a record key or a file name can hold
terminal escape sequences, line breaks or bytes that are not UTF-8.

``escape`` shows C0 and C1 control characters, DEL and lone surrogates as ``\\xNN`` (``\\t``,
``\\n``, ``\\r`` for the usual three), so nothing from the input moves the cursor, recolours the
terminal or starts a line of its own. Renderers escape data as they build their lines (a rich Text
would drop BEL, BS, VT, FF and CR without a trace); cli.output escapes every line again, keeping
only the tabs and newlines kinspect lays its text out with. ``escape_text`` does the same to rich
Text, styles kept.
``path_text`` is how a file name is shown everywhere, text and JSON: bytes that are not UTF-8
(Python keeps them as surrogate escapes, which no UTF-8 output can carry) become ``\\xNN``.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich only when a Text is escaped: JSON output never imports it
    from rich.text import Text

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_UNSAFE_BUT_LAYOUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escaped(match: re.Match) -> str:
    char = match.group()
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str, layout: bool = False) -> str:
    """``text`` with control characters, DEL and lone surrogates escaped. ``layout``: tabs and
    newlines are kept, for text kinspect laid out itself (its data escaped when it was built),
    where escape is the last guard against what a builder missed."""
    return (_UNSAFE_BUT_LAYOUT if layout else _UNSAFE).sub(_escaped, text)


def text_of(value) -> str:
    """A value as text; bytes that are not UTF-8 (a name the decoder kept as bytes) as ``\\xNN``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return str(value)


def escape_text(text: Text, layout: bool = False) -> Text:
    """A rich Text with its characters escaped and each span's style on what its characters became."""
    from rich.text import Text

    plain = text.plain
    if (_UNSAFE_BUT_LAYOUT if layout else _UNSAFE).search(plain) is None:
        return text
    cuts = sorted({cut for span in text.spans for cut in (span.start, span.end)} - {0, len(plain)})
    out = Text(style=text.style, justify=text.justify, no_wrap=text.no_wrap, end=text.end)
    for piece in text.divide(cuts):
        escaped = Text(escape(piece.plain, layout))
        for span in piece.spans:  # each span covers the whole piece: it was cut at every span's ends
            escaped.stylize(span.style)
        out.append_text(escaped)
    return out


def path_text(path: str | bytes | os.PathLike) -> str:
    """A file name as printable, JSON-able text: bytes that are not UTF-8 shown as ``\\xNN``."""
    name = os.fspath(path)
    if isinstance(name, bytes):
        return name.decode("utf-8", "backslashreplace")
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no file system gave
        return name.encode("utf-8", "backslashreplace").decode("ascii")
    return raw.decode("utf-8", "backslashreplace")
