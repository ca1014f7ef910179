"""kinspect spark benchmark (issue 14; not a test): a capture set of ≥ 2 GB recorded from real
clients, decoded to the same Parquet tables by

- plain: one Python process, a loop over the files (task.py's rows, pyarrow's dataset writer,
  exchanges partitioned by api_name as Spark writes them): the figure Spark must come close to;
- local[1] and local[2]: `kinspect spark SET --out DIR --master local[N]` (a client of the data source);
- data source local[1]: a user's job, ``spark.read.format("kinspect").load(SET)`` written as Parquet
  partitioned by api_name (kinspect/spark/source.py);
- the set's biggest file (≥ 1 GB) alone on local[1] and on local[2], where the planner splits it
  into two connection shards;
- start: `kinspect spark` on a one-packet-file set (pcaps/librdkafka-mtu1500.pcap): JVM start,
  session, one task and the writes; the fixed cost reported apart. Every run maps the JVM's class
  archive (kinspect/spark/jvmcache.py), made once after a first run in an empty cache; "start, no
  class archive" runs without one (KINSPECT_CACHE_DIR empty), as a user's first run does;
  "start, pyspark's daemon" runs pyspark's own Python daemon (--conf
  spark.python.daemon.module=pyspark.daemon): no imports done ahead, in a warm process or
  before the forks, and pyspark imported from its zip (kinspect/spark/daemon.py, warm.py).

    python tests/bench/bench_spark.py                    # the cached bench captures (below)
    python tests/bench/bench_spark.py --rounds 2 --captures A.pcap B.pcap ... --big A.pcap
    python tests/bench/bench_spark.py --rounds 3 --captures ~/.cache/kinspect-bench/{bench-1m.pcap,\
        bench-1m.first511540.pcap,bench-loopback.pcap,bench-loopback.first28354.pcap,bench-4g.pcap}
                                                         # 6.70 GB (bench-4g: tests/bench/README.md)

The default set: ~/.cache/kinspect-bench/bench-1m.pcap (1.26 GB, librdkafka producers with every
codec and a consumer group over an MTU-1500 veth; sudo python tools/record_bench_capture.py)
with its first-511540-packets prefix, and the loopback capture (4-64 KB segments; sudo python
tools/record_loopback_capture.py) with its first-28354 prefix (tests/bench/prefixes.py makes
prefixes with editcap): 2.37 GB in four files. Each is linked into one directory.

Every run is a child process, runs interleaved per round. Per run: wall, the child's CPU
(os.wait4: Python, the JVM and what they reaped), and the machine's busy CPU over the run
(/proc/stat; Spark's Python workers are the JVM's grandchildren and not all reaped in time, so
this is the run's CPU on a quiet machine: check others_cores, the CPU others used meanwhile,
estimated as that less the child's own). Throughput is capture MB per wall second; scaling is
local[1]'s wall over local[2]'s; overhead is local[1] over plain, with and without the start
cost. The projection: local[2]'s per-core throughput after the start cost, times a cluster's
cores, an upper bound (storage and network bandwidth are not modelled). Writes
tests/bench/results/spark-<date>.json and .md. Run it on a quiet machine (load < 0.5).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.measure import machine_facts, run_child  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CACHE = Path.home() / ".cache" / "kinspect-bench"
DEFAULT_SET = ["bench-1m.pcap", "bench-1m.first511540.pcap", "bench-loopback.pcap", "bench-loopback.first28354.pcap"]
TINY = REPO / "pcaps" / "librdkafka-mtu1500.pcap"
CLUSTER_CORES = (8, 32, 128)


def plain_loop(out: str, files: list[str]) -> None:
    """The single-process baseline: the same rows, written by pyarrow as Spark writes them."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from kinspect.spark.plan import Input, Unit
    from kinspect.spark.rows import EXCHANGES, FILE_COLUMNS, FILES
    from kinspect.spark.task import unit_batches
    file_rows: list[dict] = []

    def exchanges():
        for path in files:
            for batch in unit_batches(Unit((Input(path, os.path.getsize(path)),))):
                is_exchange = pc.equal(batch.column("table"), "exchanges")
                rows = batch.filter(is_exchange)
                if rows.num_rows:
                    yield pa.RecordBatch.from_arrays([rows.column(n) for n in EXCHANGES.names], schema=EXCHANGES)
                for row in batch.filter(pc.invert(is_exchange)).to_pylist():
                    file_rows.append({name: row[task] for task, name in FILE_COLUMNS.items()})

    ds.write_dataset(exchanges(), os.path.join(out, "exchanges"), schema=EXCHANGES, format="parquet",
                     partitioning=["api_name"], partitioning_flavor="hive", max_partitions=4096)
    os.makedirs(os.path.join(out, "files"))
    pq.write_table(pa.Table.from_pylist(file_rows, schema=FILES), os.path.join(out, "files", "part-0.parquet"))


def source_job(out: str, files: list[str]) -> None:
    """A user's job on local[1]: spark.read.format("kinspect") (kinspect/spark/source.py), the
    exchanges written as kinspect spark writes them (Parquet partitioned by api_name)."""
    from kinspect.spark import job, register
    spark = job.session("local[1]", app="bench source")
    register(spark)
    (spark.read.format("kinspect").load(files).write.partitionBy("api_name")
     .parquet(os.path.join(out, "exchanges")))
    job.stop(spark)


def _capture_set(paths: list[Path], into: Path) -> Path:
    into.mkdir()
    for path in paths:
        (into / path.name).symlink_to(path.resolve())
    return into


def _first_run(tmp: Path) -> dict:
    """The first run with an empty cache: it lists the JVM's classes, and a background process
    makes the class archive (kinspect/spark/jvmcache.py) that every later run maps. Waits for it."""
    cache = tmp / "cache"
    row = _run("first run, archive made after", _spark([TINY], tmp / "first", "local[1]"), TINY.stat().st_size,
               {"KINSPECT_CACHE_DIR": str(cache)})
    started = time.perf_counter()
    while not list(cache.glob("spark-jvm/*.jsa")) and time.perf_counter() - started < 900:
        time.sleep(0.5)
    row["archive_made_after_s"] = round(time.perf_counter() - started, 1)
    print(f"  class archive made {row['archive_made_after_s']} s after the first run", flush=True)
    return row


def _run(name: str, argv: list[str], size: int, env: dict | None = None) -> dict:
    started = time.strftime("%H:%M:%S")
    run = run_child(argv, env=env)
    if run.exit_code != 0:
        raise SystemExit(f"{name}: exit {run.exit_code}: {' '.join(argv)}")
    busy = run.cpu_s + run.others_cpu_s
    row = {"run": name, "started": started, **run.to_dict(), "machine_busy_cpu_s": round(busy, 2),
           "mb_per_s": round(size / 1e6 / run.wall_s, 1)}
    print(f"  {name:<22} {run.wall_s:8.1f} s wall {row['mb_per_s']:7.1f} MB/s  cpu(wait4) {run.cpu_s:7.1f} s  "
          f"machine busy {busy:7.1f} s  others {run.others_cores:.2f} cores", flush=True)
    return row


def _spark(inputs, out: Path, master: str) -> list[str]:
    return [sys.executable, "-m", "kinspect", "spark", *map(str, inputs), "--out", str(out), "--master", master]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captures", nargs="+", type=Path, help="the capture set (default: the cached bench set)")
    parser.add_argument("--big", type=Path, help="the big file run alone (default: the set's largest)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--plain-loop", nargs="+", metavar=("OUT", "FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--source-job", nargs="+", metavar=("OUT", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_loop:
        plain_loop(args.plain_loop[0], args.plain_loop[1:])
        return
    if args.source_job:
        source_job(args.source_job[0], args.source_job[1:])
        return
    captures = args.captures or [CACHE / name for name in DEFAULT_SET]
    missing = [str(c) for c in captures if not c.is_file()]
    if missing:
        raise SystemExit(f"missing captures: {missing} (record them: see this file's docstring)")
    big = args.big or max(captures, key=lambda c: c.stat().st_size)
    size = sum(c.stat().st_size for c in captures)
    big_size = big.stat().st_size
    facts = machine_facts()
    print(f"{len(captures)} captures, {size / 1e9:.2f} GB; big file {big.name} {big_size / 1e9:.2f} GB; "
          f"load average {facts['load_average']}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        tmp = Path(tmp)
        inputs = _capture_set(captures, tmp / "set")
        rows.append({"round": 0, **_first_run(tmp)})
        for round_ in range(args.rounds):
            out = tmp / f"round{round_}"
            out.mkdir()
            print(f"round {round_ + 1}", flush=True)
            runs = [
                ("start (1 small file)", _spark([TINY], out / "start", "local[1]"), TINY.stat().st_size),
                ("start, no class archive", _spark([TINY], out / "start-cold", "local[1]"), TINY.stat().st_size),
                ("start, pyspark's daemon", _spark([TINY], out / "start-pyspark-daemon", "local[1]")
                 + ["--conf", "spark.python.daemon.module=pyspark.daemon"], TINY.stat().st_size),
                ("plain loop", [sys.executable, __file__, "--plain-loop", str(out / "plain"), *map(str, captures)], size),
                ("local[1]", _spark([inputs], out / "l1", "local[1]"), size),
                ("data source local[1]", [sys.executable, __file__, "--source-job", str(out / "source"),
                                          *map(str, captures)], size),
                ("local[2]", _spark([inputs], out / "l2", "local[2]"), size),
                ("big file local[1]", _spark([big], out / "b1", "local[1]"), big_size),
                ("big file local[2]", _spark([big], out / "b2", "local[2]"), big_size),
            ]
            for name, argv, n in runs:
                cache = "" if "no class archive" in name else str(tmp / "cache")  # "": none (jvmcache)
                rows.append({"round": round_ + 1, **_run(name, argv, n, {"KINSPECT_CACHE_DIR": cache})})
            _same_rows(out)
    report = _report(rows, size, big_size)
    stamp = time.strftime("%Y%m%d-%H%M")
    args.results.mkdir(parents=True, exist_ok=True)
    result = {"captures": [{"path": str(c), "bytes": c.stat().st_size} for c in captures], "big": str(big),
              "machine": facts, "load_after": os.getloadavg(), "runs": rows, "report": report}
    (args.results / f"spark-{stamp}.json").write_text(json.dumps(result, indent=1))
    (args.results / f"spark-{stamp}.md").write_text(_markdown(result))
    print(_markdown(result))


def _same_rows(out: Path) -> None:
    """Every run of a round wrote the same exchanges (counted per api_name partition)."""
    import pyarrow.dataset as ds

    def counts(name):
        table = ds.dataset(out / name / "exchanges", format="parquet", partitioning="hive").to_table(
            columns=["api_name"])
        return table.group_by("api_name").aggregate([("api_name", "count")]).to_pylist()

    def key(rows):
        return sorted((r["api_name"], r["api_name_count"]) for r in rows)
    assert key(counts("plain")) == key(counts("l1")) == key(counts("l2")) == key(counts("source")), \
        "the runs wrote different rows"
    assert key(counts("b1")) == key(counts("b2")), "the sharded big file wrote different rows"


def _median(rows, name, field="wall_s") -> float:
    return statistics.median(r[field] for r in rows if r["run"] == name)


def _report(rows: list[dict], size: int, big_size: int) -> dict:
    start = _median(rows, "start (1 small file)")
    cold = _median(rows, "start, no class archive")
    pyspark_daemon = _median(rows, "start, pyspark's daemon")
    plain, l1, l2 = _median(rows, "plain loop"), _median(rows, "local[1]"), _median(rows, "local[2]")
    b1, b2 = _median(rows, "big file local[1]"), _median(rows, "big file local[2]")
    # None when the set is too small for the start cost to be told apart from its work
    per_core = size / 1e6 / (l2 - start) / 2 if l2 > 2 * start else None
    return {
        "start_s": start, "start_without_class_archive_s": cold, "start_with_pysparks_daemon_s": pyspark_daemon,
        "throughput_mb_s": {"plain": round(size / 1e6 / plain, 1), "local[1]": round(size / 1e6 / l1, 1),
                            "local[2]": round(size / 1e6 / l2, 1)},
        "scaling_local2_over_local1": round(l1 / l2, 2), "target_scaling": 1.8,
        # the same with the start cost taken out of both: the JVM start is reported apart
        "scaling_less_start": round((l1 - start) / (l2 - start), 2) if l2 > start else None,
        "local1_over_plain": round(l1 / plain, 3), "target_local1_over_plain": 1.15,
        "source_local1_over_plain": round(_median(rows, "data source local[1]") / plain, 3),
        "source_local1_less_start_over_plain": round((_median(rows, "data source local[1]") - start) / plain, 3),
        "local1_less_start_over_plain": round((l1 - start) / plain, 3),
        "cpu_local1_over_plain": round(_median(rows, "local[1]", "machine_busy_cpu_s")
                                       / _median(rows, "plain loop", "machine_busy_cpu_s"), 3),
        "big_file_local2_speedup": round(b1 / b2, 2), "target_big_file_speedup": 1.7,
        "big_file_speedup_less_start": round((b1 - start) / (b2 - start), 2) if b2 > start else None,
        "big_file_mb_s": {"local[1]": round(big_size / 1e6 / b1, 1), "local[2]": round(big_size / 1e6 / b2, 1)},
        "per_core_mb_s_after_start": per_core and round(per_core, 1),
        "projection_mb_s": per_core and {f"{n} cores": round(per_core * n, 0) for n in CLUSTER_CORES},
    }


def _markdown(result: dict) -> str:
    r = result["report"]
    lines = [f"# kinspect spark benchmark ({len(result['captures'])} captures, "
             f"{sum(c['bytes'] for c in result['captures']) / 1e9:.2f} GB)", "",
             f"Machine: {result['machine']['nproc']} CPUs, {result['machine']['cpu_model']}, load average before "
             f"{result['machine']['load_average']}, after {result['load_after']}", "",
             "| round | run | wall s | MB/s | CPU s (wait4) | machine busy CPU s | others' cores | peak memory MB (all processes, PSS) |",
             "|---|---|---|---|---|---|---|---|"]
    for row in result["runs"]:
        lines.append(f"| {row['round']} | {row['run']} | {row['wall_s']} | {row['mb_per_s']} | {row['cpu_s']} | "
                     f"{row['machine_busy_cpu_s']} | {row['others_cores']} | {row.get('peak_tree_pss_mb')} |")
    lines += ["", f"- start (JVM, session, one task, writes): {r['start_s']} s; without the JVM's class archive "
                  f"(jvmcache.py): {r.get('start_without_class_archive_s')} s; with pyspark's daemon (no warm "
                  f"daemon, no imports ahead): {r.get('start_with_pysparks_daemon_s')} s",
              f"- throughput MB/s: {r['throughput_mb_s']}",
              f"- local[2] / local[1] scaling: {r['scaling_local2_over_local1']}x (target ≥ {r['target_scaling']}); "
              f"without the start: {r.get('scaling_less_start')}x",
              f"- local[1] wall over plain: {r['local1_over_plain']} (target ≤ {r['target_local1_over_plain']}); "
              f"without the start: {r['local1_less_start_over_plain']}; CPU over plain: {r['cpu_local1_over_plain']}",
              f"- data source (spark.read.format(\"kinspect\"), local[1]) wall over plain: "
              f"{r.get('source_local1_over_plain')}; without the start: {r.get('source_local1_less_start_over_plain')}",
              f"- big file alone, local[2] speed-up: {r['big_file_local2_speedup']}x (target ≥ "
              f"{r['target_big_file_speedup']}); without the start: {r.get('big_file_speedup_less_start')}x; "
              f"MB/s {r['big_file_mb_s']}",
              f"- per core after the start: {r['per_core_mb_s_after_start']} MB/s; projected upper bound "
              f"{r['projection_mb_s']} MB/s"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
