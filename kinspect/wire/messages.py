"""Request and response bodies of every Kafka API version: decode_body, the entry point.

Each (api_key, api_version, kind) is compiled once, on first use (codegen.py, from the layout of
layouts.py), and run with decoder_runtime.py's run_decoder; `decoder_source()` shows the code.
A malformed body gives what decoded before the fault and a Problem with the field path.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from kinspect.limits import Budget
from kinspect.problems import ERROR, INFO, Problem
from kinspect.wire.apis import API_VERSIONS_KEY, api_name
from kinspect.wire.codegen import compile_decoder, generate
from kinspect.wire.decoder_runtime import run_decoder
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


_DECODERS: dict[tuple[int, int, str], tuple] = {}  # (key, version, kind) → (decoder, path prefix)


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
            f"{api_name(api_key)}{kind.title()} v{api_version}")
    if entry is None:
        prefix = path if path is not None else f"{api_name(api_key)}{kind.title()} v{api_version}"
        return {}, [Problem(f"unknown API key {api_key} / version {api_version} ({kind})",
                            prefix, base, ERROR, "known_api", None, (api_key, api_version))]
    compiled, default_prefix = entry
    prefix = default_prefix if path is None else path
    if not isinstance(buf, bytes):
        buf = bytes(buf)
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
