"""Shrink a failing input of a harness, in process (libFuzzer's -minimize_crash re-executes
argv[0], which a Python harness is not): ``python tests/fuzz/minimize.py fuzz_replay CRASH``.

Keeps removing and zeroing chunks of the input while the target still fails the same way (same
exception type, raised from the same line), then prints the result as base64 and as a Python
bytes literal for a regression test, and writes it beside the input as <input>.min.
"""

from __future__ import annotations

import base64
import importlib
import sys
import traceback
from pathlib import Path


def signature(target, data: bytes):
    try:
        target(data)
    except Exception as exc:  # noqa: BLE001 - any failure is what we are looking for
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return type(exc).__name__, frame.filename, frame.lineno
    return None


def shrink(target, data: bytes, wanted) -> bytes:
    chunk = max(len(data) // 2, 1)
    while chunk >= 1:
        changed = False
        at = 0
        while at < len(data):
            for candidate in (data[:at] + data[at + chunk:],
                              data[:at] + bytes(min(chunk, len(data) - at)) + data[at + chunk:]):
                if candidate != data and signature(target, candidate) == wanted:
                    data, changed = candidate, True
                    break
            else:
                at += chunk
        if not changed:
            chunk //= 2
    return data


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: python tests/fuzz/minimize.py fuzz_<parser> INPUT")
    sys.path.insert(0, str(Path(__file__).parent))
    target = importlib.import_module(sys.argv[1].removesuffix(".py")).target
    path = Path(sys.argv[2])
    data = path.read_bytes()
    wanted = signature(target, data)
    if wanted is None:
        sys.exit(f"{path} does not fail {sys.argv[1]}")
    small = shrink(target, data, wanted)
    path.with_name(path.name + ".min").write_bytes(small)
    print(f"{len(data)} -> {len(small)} bytes, failing as {wanted}")
    print("base64:", base64.b64encode(small).decode())
    print("bytes: ", repr(small))


if __name__ == "__main__":
    main()
