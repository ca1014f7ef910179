"""JSON Lines: one object per line. Bytes become text when they are valid UTF-8, else {"b64": ...}.

orjson does the encoding: on decode's hot path it is about 6× faster than the standard library
(measured on a capture of compressed Produce/Fetch traffic, where JSON was half the run time).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from functools import partial

import orjson

from kinspect import native
from kinspect.records.packed import PackedRecords
from kinspect.records.stream import BatchStream, RecordStream

# Nearly every dict has str keys; OPT_NON_STR_KEYS (for the few that don't) costs a fifth of
# orjson's time, so it is only a second try.
_OPTIONS = 0
_LINE_OPTIONS = orjson.OPT_APPEND_NEWLINE


# A batch too big to hold (RecordStream) is written as a mark first, then its records replace
# the mark a chunk at a time. The nonce keeps decoded data from forging a mark.
_MARK = f"\x00kinspect-records-{os.urandom(16).hex()}\x00"
_MARK_JSON = orjson.dumps(_MARK)
_streams: list = []  # RecordStreams and BatchStreams met by the dump in progress
_preview: list[int] = []           # set by plain(): streams shown as their first records


def _default(value):
    if type(value) is PackedRecords:  # the common case first: native text_or took the bytes
        text = value.to_json()
        return value.records() if text is None else orjson.Fragment(text)
    if type(value) is bytes:  # keys and values of records, when the C twin is not there
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(raw).decode("ascii")}
    if isinstance(value, (RecordStream, BatchStream)):  # a legacy wrapper's stream is a RecordStream
        if _preview:
            shown = _preview[0]
            more = f"… {len(value) - shown} more {'batches' if type(value) is BatchStream else 'records'}"
            return value.head(shown) + ([f"{more} (streamed)"] if len(value) > shown else [])
        _streams.append(value)
        return _MARK
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, int):  # an int subclass
        return int(value)
    return str(value)


def _std_default(value):
    """_default for the standard library's encoder, which knows no orjson.Fragment."""
    return value.records() if type(value) is PackedRecords else _default(value)


# Record keys and values are most of what orjson hands to `default`: C turns them into text.
_fast_default = (partial(native.bytes_json.text_or, _default) if native.bytes_json is not None
                 else _default)


def dumpb(record, newline: bool = False) -> bytes:
    """One JSON object, UTF-8 encoded, with a newline at the end only when asked (orjson appends
    it in place: ``line + b"\\n"`` would copy lines of megabytes). NaN and infinities become null."""
    parts = pieces(record, newline)
    return parts[0] if type(parts) is list else b"".join(parts)


def pieces(record, newline: bool = False) -> list[bytes] | Iterator[bytes]:
    """``dumpb``'s line as pieces to write one after the other: one piece, unless the record holds
    batches too big to hold, whose records are then encoded a chunk at a time as they are read."""
    line = _dump(record, newline)
    if not _streams:
        return [line]
    streams = list(_streams)
    _streams.clear()
    return _spliced(line, streams)


def _spliced(line: bytes, streams: list) -> Iterator[bytes]:
    parts = line.split(_MARK_JSON)
    for part, stream in zip(parts, streams):
        yield part
        yield b"["
        for number, chunk in enumerate(stream.chunks()):
            if number:
                yield b","
            yield from _inside_brackets(pieces(chunk))  # a chunk of batches may hold streams
        yield b"]"
    yield parts[-1]


def _inside_brackets(parts) -> Iterator[bytes]:
    """The pieces of a JSON array without its opening and closing bracket."""
    if type(parts) is list:
        yield parts[0][1:-1]
        return
    held = None
    for number, piece in enumerate(parts):
        if held is not None:
            yield held
        held = piece[1:] if number == 0 else piece
    if held:
        yield held[:-1]


def _dump(record, newline: bool) -> bytes:
    """The line, with the streams its marks stand for in _streams: each try starts them afresh
    (a failed try's streams, kept, were written again after the line)."""
    option = _LINE_OPTIONS if newline else _OPTIONS
    _streams.clear()
    try:
        return orjson.dumps(record, default=_fast_default, option=option)
    except TypeError:
        pass
    _streams.clear()
    try:  # a dict with int (or other non-str) keys
        return orjson.dumps(record, default=_fast_default, option=option | orjson.OPT_NON_STR_KEYS)
    except TypeError:  # integers beyond 64 bits, or surrogates: the standard library takes them
        _streams.clear()
        text = json.dumps(record, default=_std_default, ensure_ascii=False, separators=(",", ":"))
        line = text + "\n" if newline else text
        try:
            return line.encode()
        except UnicodeEncodeError:  # a name kept with surrogate escapes (not UTF-8): as \xNN text
            return _SURROGATE.sub(_escaped_surrogate, line).encode()


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped_surrogate(match: re.Match) -> str:
    """A lone surrogate inside a JSON string, as the text render.safe.path_text gives it."""
    code = ord(match.group())
    return f"\\\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\\\u{code:04x}"


def dumps(record) -> str:
    return dumpb(record).decode("utf-8")


def plain(value, streamed_shown: int = 200):
    """The JSON-able form of a decoded value (bytes converted), for renderers that need objects;
    a batch too big to hold shows its first ``streamed_shown`` records and how many more."""
    _preview.append(streamed_shown)
    try:
        return json.loads(dumpb(value))
    finally:
        _preview.pop()
