"""The input's text in HTML: client ids, topic names, group ids and values are hostile.

``text`` escapes a value for an HTML text node or a quoted attribute (control characters shown
as ``\\xNN`` first, as on a terminal). ``script_json`` is JSON that can sit inside a <script>
element: ``<``, ``>``, ``&`` and the line separators U+2028/U+2029 are written as ``\\uXXXX``
escapes, so no ``</script>`` or ``<!--`` can end or change the element; the page's script reads
it with JSON.parse and hands strings only to text (textContent, Vega's SVG text), never to
innerHTML."""

from __future__ import annotations

import html
import json

from kinspect.render.safe import escape, text_of

_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                                "\u2028": "\\u2028", "\u2029": "\\u2029"})


def shown(value) -> str:
    """A value as the page shows it: text, control characters escaped."""
    return escape(text_of(value))


def text(value) -> str:
    """A value as HTML text (or a double-quoted attribute's value)."""
    return html.escape(shown(value), quote=True)


def script_json(value) -> str:
    """``value`` as JSON safe inside <script type="application/json">."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                      default=shown).translate(_SCRIPT_UNSAFE)
