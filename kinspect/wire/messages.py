"""Request and response bodies of every Kafka API version: decode_body, the entry point.

Each (api_key, api_version, kind) is compiled once, on first use (codegen.py, from the layout of
layouts.py), and run with decoder_runtime.py's run_decoder; `decoder_source()` shows the code.
A malformed body gives what decoded before the fault and a Problem with the field path.
Where the C accelerator is built, a body's regular case is decoded in one call (bodywalk.py)
first; the generated decoder decodes what it gives up on.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from kinspect.limits import DEFAULT_LIMITS, Budget
from kinspect.problems import ERROR, INFO, Problem
from kinspect.wire import bodywalk
from kinspect.wire.apis import API_VERSIONS_KEY, api_name
from kinspect.wire.codegen import compile_decoder, generate
from kinspect.wire.decoder_runtime import Context, record_set, run_decoder
from kinspect.wire.layouts import DEFINED, layout

UNSUPPORTED_VERSION = 35
_I16 = struct.Struct(">h").unpack_from


@lru_cache(maxsize=None)
def _compiled(api_key: int, api_version: int, kind: str):
    """The decoder of a DEFINED body version."""
    return compile_decoder(layout(api_key, api_version, kind),
                           f"<kinspect {api_name(api_key)}{kind.title()} v{api_version}>")


def decoder_source(api_key: int, api_version: int, kind: str) -> str | None:
    """The generated decoder of one body version, for reading and debugging."""
    lay = layout(api_key, api_version, kind)
    return None if lay is None else generate(lay)[0]


# (key, version, kind) → (decoder, path prefix, bodywalk program or None)
_DECODERS: dict[tuple[int, int, str], tuple] = {}


def decode_body(api_key: int, api_version: int, kind: str, buf: bytes | memoryview, base: int = 0,
                path: str | None = None, *, raw_records: bool = False, record_checks: bool = True,
                start: int = 0, budget: Budget | None = None) -> tuple[dict, list[Problem]]:
    """Decode one request or response body: ``buf[start:]`` (the bytes after the header; a
    frame and its header length need no copy), ``base`` the absolute position of ``buf[0]``.

    Returns the decoded fields (snake_case keys) and the problems met; a malformed body
    yields what was decoded before the fault plus an error Problem with the field path
    and the frame-absolute offset. raw_records keeps record sets as bytes. ``budget`` bounds
    the array entries, records held and decompression (kinspect.limits; defaults otherwise).
    """
    entry = _DECODERS.get((api_key, api_version, kind))
    if entry is None and (api_key, api_version, kind) in DEFINED:
        entry = _DECODERS[(api_key, api_version, kind)] = (
            _compiled(api_key, api_version, kind),
            f"{api_name(api_key)}{kind.title()} v{api_version}",
            bodywalk.program(layout(api_key, api_version, kind)) if bodywalk.walk is not None else None)
    if entry is None:
        prefix = path if path is not None else f"{api_name(api_key)}{kind.title()} v{api_version}"
        return {}, [Problem(f"unknown API key {api_key} / version {api_version} ({kind})",
                            prefix, base, ERROR, "known_api", None, (api_key, api_version))]
    compiled, default_prefix, program = entry
    prefix = default_prefix if path is None else path
    if not isinstance(buf, bytes):
        buf = bytes(buf)
    if program is not None:
        walked = bodywalk.walk(buf, start, len(buf), program, raw_records,
                               (budget.limits if budget is not None else DEFAULT_LIMITS).max_items, prefix)
        if walked is not None:
            return _with_record_sets(walked, buf, base, prefix, raw_records, kind == "response",
                                     record_checks, budget)
    body, problems = run_decoder(compiled, buf, base, prefix, raw_records, kind == "response",
                                 record_checks, start, budget)
    if (api_key == API_VERSIONS_KEY and kind == "response" and api_version > 0 and problems
            and len(buf) - start >= 2 and _I16(buf, start)[0] == UNSUPPORTED_VERSION):
        # a broker lacking the requested version answers with a v0 body
        v0_body, v0_problems = run_decoder(_compiled(api_key, 0, kind), buf, base, prefix,
                                           raw_records, start=start, budget=budget)
        if not v0_problems:
            return v0_body, [Problem(
                f"broker answered ApiVersions v{api_version} with a v0 body (UNSUPPORTED_VERSION)",
                prefix, base + start, INFO, "api_versions_fallback", api_version, 0)]
    return body, problems


def _with_record_sets(walked: tuple[dict, list], buf: bytes, base: int, prefix: str, raw_records: bool,
                      partial_ok: bool, record_checks: bool, budget: Budget | None) -> tuple[dict, list[Problem]]:
    """A walked body with its record sets decoded in place, in order, as the generated decoder
    decodes them."""
    body, sets = walked
    if not sets:
        return body, []
    c = Context(prefix, base, raw_records, partial_ok, record_checks, budget)
    for obj, key, pos, n, path in sets:
        obj[key] = record_set(buf, pos, n, path, c)
    return body, c.problems
