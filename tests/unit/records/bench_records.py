"""Records decoding speed (a benchmark, not a test): python -m tests.unit.records.bench_records

Prints records/s and MB/s for the real mixed-formats Fetch response (kafkajs) and for 200,000
records in 1,000-record v2 batches built by aiokafka, per codec, with and without checks.
Times are process CPU time (best of 5), so other work on the machine skews them less.
"""

from __future__ import annotations

import time

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from kinspect.records import decode_records
from tests.unit.records.conftest import kafkajs_fetch

T0 = 1_700_000_000_000


def generated(count: int, codec: int, per_batch: int = 1000) -> bytes:
    out = bytearray()
    for start in range(0, count, per_batch):
        builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
        for i in range(start, min(count, start + per_batch)):
            builder.append(i - start, T0 + i, b"key-%d" % i, b"v" * 100,
                           [("trace", b"abc")] if i % 10 == 0 else [])
        batch = bytearray(builder.build())
        batch[0:8] = start.to_bytes(8, "big")  # base offset: not covered by the CRC
        out += batch
    return bytes(out)


def measure(name: str, data: bytes, repeat: int = 5, **options) -> None:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        batches, problems = decode_records(data, **options)
        best = min(best, time.process_time() - started)
    records = sum(len(b["records"]) for b in batches)
    assert not [p for p in problems if p.severity != "info"], problems[:3]
    print(f"{name:34} {records:8} records {records / best:12,.0f} records/s "
          f"{len(data) / best / 1e6:7.1f} MB/s")


def main() -> None:
    (_, _, at, mixed), = kafkajs_fetch("v4_response_mixed_formats")
    measure("kafkajs mixed formats", mixed, base=at)
    measure("kafkajs mixed formats, checks", mixed, base=at, checks=True)
    for codec, name in enumerate(("none", "gzip", "snappy", "lz4", "zstd")):
        data = generated(200_000, codec)
        measure(f"aiokafka 200k v2 {name}", data)
        measure(f"aiokafka 200k v2 {name}, checks", data, checks=True)


if __name__ == "__main__":
    main()
