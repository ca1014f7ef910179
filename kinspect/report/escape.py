"""The input's text in HTML: client ids, topic names, group ids and values are hostile.

``shown`` is a value as text (control characters as ``\\xNN``, as on a terminal; cut at
``LONGEST`` characters). ``text`` escapes a value for an HTML text node or a quoted attribute.
``script_json`` is JSON that can sit inside a <script>
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


LONGEST = 300  # characters of one value the page shows (a client id may be 32,767)


def shown(value, longest: int = LONGEST) -> str:
    """A value as the page shows it: text, control characters escaped, at most ``longest``
    characters and a count of the rest."""
    raw = text_of(value)
    text = escape(raw[:longest])  # escaped after the cut: a 32 KB name costs its first characters
    if len(text) > longest or len(raw) > longest:
        return f"{text[:longest]}… ({len(raw) - longest if len(raw) > longest else 0} more characters)"
    return text


def text(value) -> str:
    """A value as HTML text (or a double-quoted attribute's value); the model's text is cut
    already, and kinspect's own (a summary, a finding's facts) is not cut again."""
    return html.escape(shown(value, longest=1 << 20), quote=True)


def script_json(value) -> str:
    """``value`` as JSON safe inside <script type="application/json">."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                      default=shown).translate(_SCRIPT_UNSAFE)
