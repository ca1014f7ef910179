"""Benchmark: `kinspect validate` on a ≥ 1 GiB segment written by a real broker, against simply
reading the file (the physical limit) and against Kafka's own kafka-dump-log.

    python tests/bench/bench_validate.py [--repeat 3] [--segment FILE] [--code REF] [--before REF]

The segment: Apache Kafka 4.1.2 in the lab (tests/lab/kafka.py) fed by Kafka's own
ProducerPerformance, one segment of 1.1 GiB, 1000-byte records, compression none: built once by
tests/bench/bench_dump.py's segment_path() and cached in ~/.cache/kinspect-lab/bench/
(--segment benchmarks any other file). A batch-aligned 128 MiB prefix of it shows whether peak
memory depends on the file size.

Every command runs as a child process under GNU time (wall time, CPU time, peak RSS) with
stdout to /dev/null, the file already in the page cache, the commands interleaved round by
round; the best of --repeat is kept. kinspect runs from a snapshot of the package at --code
(default HEAD; 'worktree' for the files as they are), and with --before also at another ref, so
one result compares two versions under the same load.
Results go to tests/bench/results/validate.json. Not collected by pytest, and nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_dump import segment_path  # noqa: E402
from tests.bench.measure import machine_facts, snapshot_kinspect  # noqa: E402
from tests.lab.kafka import KAFKA_4, KafkaTools  # noqa: E402

RESULTS = REPO / "tests" / "bench" / "results" / "validate.json"
PREFIX_BYTES = 128 << 20
GNU_TIME = shutil.which("time") or "/usr/bin/time"

READ_LOOP = """
import sys
with open(sys.argv[1], "rb", buffering=0) as f:
    buf = bytearray(1 << 20)
    while f.readinto(buf):
        pass
"""

# The floor of a Python walk that checks only batch CRCs (what kafka-dump-log's isvalid does):
# frame each batch, CRC-32C its bytes. validate adds decoding and checking every record.
CRC_WALK = """
import mmap, struct, sys
from crc32c import crc32c
frame, u32 = struct.Struct(">qi"), struct.Struct(">I")
with open(sys.argv[1], "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
    view, pos, bad = memoryview(m), 0, 0
    while pos + 61 <= len(m):
        end = pos + 12 + frame.unpack_from(m, pos)[1]
        bad += crc32c(view[pos + 21:end]) != u32.unpack_from(m, pos + 17)[0]
        pos = end
    view.release()
sys.exit(1 if bad else 0)
"""


def batch_aligned_prefix(segment: Path, size: int) -> Path:
    """The segment's first batches, up to about `size` bytes, as a file of its own."""
    prefix = segment.with_name(f"prefix-{size >> 20}MiB") / "00000000000000000000.log"
    if prefix.exists():
        return prefix
    with open(segment, "rb") as f:
        pos = 0
        while pos < size:
            f.seek(pos + 8)
            pos += 12 + struct.unpack(">i", f.read(4))[0]
        f.seek(0)
        data = f.read(pos)
    prefix.parent.mkdir(exist_ok=True)
    prefix.write_bytes(data)
    return prefix


def timed(argv: list[str], cwd: Path = REPO) -> dict:
    """One run under GNU time: a child forked from this (large) Python process would count the
    parent's pages in its peak RSS until it execs, so wait4 on it alone would overstate it."""
    with tempfile.NamedTemporaryFile("r") as report:
        done = subprocess.run([GNU_TIME, "-f", "%e %U %S %M", "-o", report.name, *argv],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        wall, user, system, rss_kib = report.read().split()[-4:]
    return {"wall_s": float(wall), "cpu_s": round(float(user) + float(system), 2),
            "peak_rss_mb": round(int(rss_kib) / 1024, 1), "exit_code": done.returncode}


def best(runs: list[dict]) -> dict:
    chosen = min(runs, key=lambda run: run["wall_s"])
    return {**chosen, "all_wall_s": [run["wall_s"] for run in runs],
            "all_cpu_s": [run["cpu_s"] for run in runs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--segment", type=Path, help="benchmark this file instead")
    parser.add_argument("--code", default="HEAD", help="the kinspect to measure: a git ref, or 'worktree'")
    parser.add_argument("--before", help="also measure kinspect validate at this git ref")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kinspect-bench-") as scratch:
        run(options, Path(scratch))


def run(options, scratch: Path) -> None:
    code = {"now": snapshot_kinspect(scratch / "now", options.code)}
    if options.before:
        code["before"] = snapshot_kinspect(scratch / "before", options.before)
    segment = options.segment or segment_path(1.1, 1000)
    prefix = batch_aligned_prefix(segment, PREFIX_BYTES)
    python, kinspect = sys.executable, [sys.executable, "-m", "kinspect", "validate"]
    dump_log = KafkaTools().java_command("kafka.tools.DumpLogSegments", "--files", str(segment),
                                         heap="1g", server=True)
    commands = {
        "cat > /dev/null": ["cat", str(segment)],
        "python read loop (1 MiB readinto)": [python, "-c", READ_LOOP, str(segment)],
        "python CRC-32C walk (batch CRCs only)": [python, "-c", CRC_WALK, str(segment)],
        "kafka-dump-log (batch CRCs, isvalid)": dump_log,
        "kafka-dump-log --deep-iteration": [*dump_log, "--deep-iteration"],
        "kinspect validate": [*kinspect, str(segment)],
        "kinspect validate --json": [*kinspect, "--json", str(segment)],
        "kinspect validate (128 MiB prefix)": [*kinspect, str(prefix)],
    }
    if options.before:
        commands[f"kinspect validate at {code['before']['commit'][:7]} (before)"] = [*kinspect, str(segment)]
    where = {name: scratch / ("before" if name.endswith("(before)") else "now")
             for name in commands if "kinspect" in name}
    timed(["cat", str(segment)])  # into the page cache
    load_before = machine_facts()["load_average"]
    every: dict[str, list[dict]] = {name: [] for name in commands}
    for round_ in range(options.repeat):  # interleaved: the machine's load moves
        for name, argv in commands.items():
            every[name].append(timed(argv, where.get(name, REPO)))
            print(f"round {round_} {name}: {every[name][-1]}", flush=True)
    runs = {name: best(done) for name, done in every.items()}
    size = segment.stat().st_size
    for name, run in runs.items():
        measured = prefix.stat().st_size if "prefix" in name else size
        run["mb_per_s"] = round(measured / run["wall_s"] / 1e6, 1)
        run["mb_per_cpu_s"] = round(measured / max(run["cpu_s"], 0.01) / 1e6, 1)
    validate = runs["kinspect validate"]
    # on a shared machine CPU time is the steadier number; wall time includes waiting for a CPU
    ratios = {
        f"validate {kind} / {name}": round(validate[key] / max(runs[name][key], 0.01), 2)
        for kind, key in (("wall time", "wall_s"), ("CPU time", "cpu_s"))
        for name in ("cat > /dev/null", "python read loop (1 MiB readinto)",
                     "python CRC-32C walk (batch CRCs only)", "kafka-dump-log (batch CRCs, isvalid)",
                     "kafka-dump-log --deep-iteration")
    }
    counts = _counts(segment, scratch / "now")
    result = {
        "segment": {"path": str(segment), "bytes": size, "gib": round(size / 2**30, 3), **counts,
                    "written_by": f"Apache Kafka {KAFKA_4} (lab broker, ProducerPerformance, "
                                  f"1000-byte records, compression none)"
                    if options.segment is None else "given with --segment"},
        "prefix_bytes": prefix.stat().st_size,
        "method": f"best wall time of {options.repeat} interleaved runs per command, stdout to /dev/null, "
                  f"file in the page cache; CPU time and peak RSS of that run from GNU time",
        "machine": {**machine_facts(), "load_average_before": load_before, "kinspect": code["now"],
                    **({"kinspect_before": code["before"]} if options.before else {})},
        "runs": runs,
        "ratios": ratios,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"ratios": ratios, "mb_per_s": {k: v["mb_per_s"] for k, v in runs.items()}},
                     indent=1))


def _counts(segment: Path, code: Path) -> dict:
    """Batches and records, from kinspect validate's own file summary."""
    done = subprocess.run([sys.executable, "-m", "kinspect", "validate", "--json", str(segment)],
                          capture_output=True, text=True, cwd=code, env={**os.environ, "PYTHONPATH": str(REPO)})
    summary = json.loads(done.stdout.splitlines()[-1])
    return {"batches": summary["batches"], "records": summary["records"],
            "validate_status": summary["status"]}


if __name__ == "__main__":
    main()
