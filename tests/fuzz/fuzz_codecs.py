"""Fuzz decompression (kinspect/records/codecs.py): gzip, snappy (raw and xerial), lz4 (with
the KIP-57 header checksum of magic 0) and zstd, within an output bound.

Input: the codec (its low 3 bits, as in a batch's attributes), the magic (0, 1 or 2), the bound
(bits 0-1: 64 bytes, 4 KiB, 1 MiB, 64 MiB), then the payload. Checks: no exception; the output
is None or within the bound; notes are (severity, text); a memoryview payload gives the same.
"""

import harness

with harness.instrumented("kinspect.records"):
    from kinspect.records.codecs import decompress

BOUNDS = (64, 4096, 1 << 20, 64 << 20)


def target(data: bytes) -> None:
    if len(data) < 3:
        return
    codec, magic, bound, payload = data[0] & 7, data[1] % 3, BOUNDS[data[2] & 3], data[3:]
    out, notes = decompress(codec, payload, bound, magic)
    if out is not None and (type(out) is not bytes or len(out) > bound):
        raise harness.Finding(f"{type(out).__name__} of {len(out)} bytes from a bound of {bound}")
    for severity, text in notes:
        if severity not in ("error", "warning", "info") or type(text) is not str:
            raise harness.Finding(f"malformed note {(severity, text)!r}")
    harness.agree("decompress", decompress(codec, memoryview(payload), bound, magic), (out, notes),
                  ("a memoryview", "bytes"))


if __name__ == "__main__":
    harness.main(target, "codecs")
