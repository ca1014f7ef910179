"""Benchmark (issue 36, item 4): `kinspect dump` and `validate` of many small segments against the
same bytes in one segment: the per-file overhead.

    python tests/bench/bench_dump_many.py [--gib 1.1] [--partitions 1000] [--repeat 3]

The one segment is bench_dump.py's (written by the lab's Apache Kafka broker with Kafka's own
ProducerPerformance, compression none, 1,000-byte records). The many are that segment's batches,
unchanged, dealt out in order into ``--partitions`` partition directories ``bench-N/`` of about
equal size (1.1 MiB each by default), each file named by its first batch's base offset as Kafka
names segments: the same bytes, batch for batch, in 1,000 files instead of one. (The broker would
also write an index, a time index and a snapshot per partition; they are left out so that both
sides read exactly the same bytes.)

Each command runs as a child under GNU time, stdout to /dev/null, files in the page cache; the
one-file and the many-file runs alternate round by round (the machine's speed drifts), and each
figure is the median of --repeat. Target: the many within 1.5x the one's time. Results go to
tests/bench/results/bench_dump_many.json. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_dump import kinspect, measure, segment_path  # noqa: E402
from tests.bench.measure import machine_facts  # noqa: E402

RESULTS = REPO / "tests" / "bench" / "results" / "bench_dump_many.json"
_HEADER = struct.Struct(">qi")  # a batch's base offset and length (the bytes after it)


def batch_bounds(segment: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of every batch of the segment, read from their headers."""
    bounds = []
    with open(segment, "rb") as f:
        position = 0
        while True:
            header = f.read(12)
            if len(header) < 12:
                return bounds
            base_offset, length = _HEADER.unpack(header)
            bounds.append((position, 12 + length, base_offset))
            position += 12 + length
            f.seek(position)


def split(segment: Path, partitions: int, out: Path) -> Path:
    """The segment's batches dealt into ``partitions`` directories of about equal bytes (made once)."""
    done = out / ".complete"
    if done.exists():
        return out
    bounds = batch_bounds(segment)
    total = sum(size for _, size, _ in bounds)
    share = total / partitions
    out.mkdir(parents=True, exist_ok=True)
    with open(segment, "rb") as source:
        index, written, current = 0, 0, None
        for position, size, base_offset in bounds:
            if current is None or (written >= share * (index) and index < partitions):
                if current is not None:
                    current.close()
                directory = out / f"bench-{index}"
                directory.mkdir(exist_ok=True)
                current = open(directory / f"{base_offset:020d}.log", "wb")
                index += 1
            source.seek(position)
            current.write(source.read(size))
            written += size
        current.close()
    done.write_text(f"{index} files, {total} bytes\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.1)
    parser.add_argument("--record-size", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    segment = segment_path(options.gib, options.record_size)
    many = split(segment, options.partitions, segment.parent.parent.parent / f"many-{options.partitions}")
    files = sorted(many.glob("bench-*/*.log"))
    size = segment.stat().st_size
    assert sum(f.stat().st_size for f in files) == size, "the split must hold the segment's bytes"
    commands = {
        "dump --records --json": ["dump", "--records", "--json"],
        "dump (batches, CRC and checks)": ["dump"],
        "validate": ["validate"],
    }
    for path in [segment, *files]:  # into the page cache
        path.read_bytes()
    load = os.getloadavg()[0]
    runs: dict = {}
    for name, args in commands.items():
        for _ in range(options.repeat):
            for side, target in (("one segment", str(segment)), (f"{len(files)} segments", str(many))):
                run = measure(kinspect(*args, target), 1, cwd=REPO)
                runs.setdefault(name, {}).setdefault(side, []).append(run)
                print(f"{name}, {side}: {run}", flush=True)
    summary = {}
    for name, sides in runs.items():
        (one_side, one), (many_side, lots) = sides.items()
        one_s = statistics.median(r["seconds"] for r in one)
        many_s = statistics.median(r["seconds"] for r in lots)
        one_cpu = statistics.median(r["cpu_s"] for r in one)
        many_cpu = statistics.median(r["cpu_s"] for r in lots)
        summary[name] = {
            "one segment s": one_s, "many segments s": many_s, "wall ratio": round(many_s / one_s, 3),
            "one segment CPU s": one_cpu, "many segments CPU s": many_cpu,
            "CPU ratio": round(many_cpu / one_cpu, 3),
            "per extra file ms (CPU)": round((many_cpu - one_cpu) / (len(files) - 1) * 1000, 3),
            "peak RSS MiB one / many": [max(r["peak_rss_mib"] for r in one), max(r["peak_rss_mib"] for r in lots)],
        }
    result = {
        "bytes": size, "files": len(files), "target": "many within 1.5x the one segment's time",
        "machine": machine_facts(),
        "method": f"median of {options.repeat}, one and many alternated, stdout to /dev/null, page cache; "
                  f"load average before: {load:.1f} on {os.cpu_count()} CPUs",
        "summary": summary, "runs": runs, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
