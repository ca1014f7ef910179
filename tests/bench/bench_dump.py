"""Benchmark: kinspect dump and validate against kafka-dump-log on a ≥ 1 GiB real segment.

    python tests/bench/bench_dump.py [--gib 1.1] [--record-size 1000] [--repeat 2]

The segment is written once by the lab's Apache Kafka broker (tests/lab/kafka.py) with
Kafka's own producer-perf-test (ProducerPerformance), one segment (segment.bytes at its
maximum), and kept in ~/.cache/kinspect-lab/bench/. Each command then runs as a child
process (under GNU time) with stdout to /dev/null; wall time and peak RSS are taken per
run, the best of --repeat. `cat` gives the physical limit of reading the (page-cached) file.
Results go to tests/bench/results/bench_dump.json. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.measure import machine_facts  # noqa: E402
from tests.lab.kafka import CACHE, KAFKA_4, KafkaBroker, KafkaTools  # noqa: E402

RESULTS = REPO / "tests" / "bench" / "results" / "bench_dump.json"
TOPIC = "bench"
MAX_SEGMENT = 2**31 - 1
GNU_TIME = shutil.which("time") or "/usr/bin/time"


def segment_path(gib: float, record_size: int) -> Path:
    """The benchmark segment, produced by a real broker on first use."""
    workdir = CACHE / "bench" / f"dump-{gib}gib-{record_size}b"
    segment = workdir / "logs" / f"{TOPIC}-0" / "00000000000000000000.log"
    done = workdir / ".complete"
    if done.exists():
        return segment
    shutil.rmtree(workdir, ignore_errors=True)
    records = int(gib * 2**30 / record_size) + 1
    print(f"producing {records:,} records of {record_size} B through Kafka {KAFKA_4}...",
          flush=True)
    with KafkaBroker(workdir=workdir, heap="1g",
                     config={"log.segment.bytes": MAX_SEGMENT,
                             "log.retention.bytes": -1, "log.retention.ms": -1}) as kafka:
        kafka.create_topic(TOPIC, config={"segment.bytes": MAX_SEGMENT})
        kafka.run("org.apache.kafka.tools.ProducerPerformance", "--topic", TOPIC,
                  "--num-records", str(records), "--record-size", str(record_size),
                  "--throughput", "-1", "--producer-props", f"bootstrap.servers={kafka.bootstrap}",
                  "acks=1", "linger.ms=20", "batch.size=262144", "compression.type=none",
                  timeout=3600)
    size = segment.stat().st_size
    if size < gib * 2**30:
        raise SystemExit(f"the segment holds {size:,} bytes, less than {gib} GiB")
    done.write_text(f"{size}\n")
    return segment


def measure(argv: list[str], repeat: int, cwd: Path | None = None) -> dict:
    """Best wall time and its peak RSS over `repeat` runs, stdout to /dev/null.

    GNU time runs the command: a child forked from this Python would count the parent's
    pages in its peak RSS until it execs.
    """
    best = None
    for _ in range(repeat):
        with open(os.devnull, "wb") as sink, tempfile.NamedTemporaryFile("r") as report:
            done = subprocess.run([GNU_TIME, "-f", "%e %M %U %S", "-o", report.name, *argv],
                                  stdout=sink, stderr=subprocess.PIPE, cwd=cwd)
            seconds, max_rss_kib, user, system = report.read().split()[-4:]
        if done.returncode not in (0, 1):
            raise SystemExit(f"{argv[:4]}... exited {done.returncode}: "
                             f"{done.stderr[-2000:].decode(errors='replace')}")
        run = {"seconds": float(seconds), "cpu_s": round(float(user) + float(system), 2),
               "peak_rss_mib": round(int(max_rss_kib) / 1024, 1), "exit_code": done.returncode}
        if best is None or run["seconds"] < best["seconds"]:
            best = run
    return best


def kinspect(command: str, *args: str) -> list[str]:
    """`kinspect COMMAND ...` (through the module if the command is not registered yet)."""
    from kinspect.cli import cli
    if cli.get_command(None, command) is not None:
        return [sys.executable, "-m", "kinspect", command, *args]
    code = (f"import sys; from kinspect.cli.{command} import {command}; "
            f"{command}.main(sys.argv[1:], prog_name='kinspect {command}')")
    return [sys.executable, "-c", code, *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.1)
    parser.add_argument("--record-size", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    options = parser.parse_args()
    segment = segment_path(options.gib, options.record_size)
    tools = KafkaTools()
    dump_log = tools.java_command("kafka.tools.DumpLogSegments", "--files", str(segment),
                                  "--deep-iteration", heap="1g", server=True)
    commands = {
        "cat (reading the file)": ["cat", str(segment)],
        "kafka-dump-log --deep-iteration": dump_log,
        "kafka-dump-log --deep-iteration --print-data-log": [*dump_log, "--print-data-log"],
        "kinspect dump --records --json": kinspect("dump", "--records", "--json", str(segment)),
        "kinspect dump (batches, CRC and checks)": kinspect("dump", str(segment)),
        "kinspect dump --no-checks (headers only)": kinspect("dump", "--no-checks", str(segment)),
        "kinspect validate": kinspect("validate", str(segment)),
    }
    measure(["cat", str(segment)], 1)  # into the page cache
    load = os.getloadavg()[0]
    runs = {}
    for name, argv in commands.items():
        print(f"{name}...", flush=True)
        runs[name] = measure(argv, options.repeat, cwd=REPO)
        print(f"  {runs[name]}", flush=True)
    reference = runs["kafka-dump-log --deep-iteration"]
    printing = runs["kafka-dump-log --deep-iteration --print-data-log"]  # issue 36's like-for-like peer
    for run in runs.values():
        run["time_vs_kafka_dump_log"] = round(run["seconds"] / reference["seconds"], 3)
        run["cpu_vs_kafka_dump_log_print_data_log"] = round(run["cpu_s"] / max(printing["cpu_s"], 0.01), 3)
    size = segment.stat().st_size
    result = {
        "segment": {"bytes": size, "gib": round(size / 2**30, 3),
                    "record_size": options.record_size, "written_by": f"Apache Kafka {KAFKA_4} "
                    f"(lab broker, ProducerPerformance, compression none)"},
        "machine": {**machine_facts(), "cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(),
                    "java": subprocess.run(["java", "-version"], capture_output=True,
                                           text=True).stderr.splitlines()[0]},
        "method": f"best of {options.repeat}, stdout to /dev/null, file in the page cache; "
                  f"wall time and peak RSS from GNU time; load average before: "
                  f"{load:.1f} on {os.cpu_count()} CPUs",
        "runs": runs,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
