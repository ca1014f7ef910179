"""kinspect spark benchmark (issue 14; not a test): a capture set of ≥ 2 GB recorded from real
clients, decoded to the same Parquet tables by

- plain: one Python process, a loop over the files (task.py's rows, pyarrow's dataset writer,
  exchanges partitioned by api_name as Spark writes them): the figure Spark must come close to;
- local[1] and local[2]: `kinspect spark SET --out DIR --master local[N]` (a client of the data source);
- data source local[1]: a user's job, ``spark.read.format("kinspect").load(SET)`` written as Parquet
  partitioned by api_name (kinspect/spark/source.py); "data source start (1 small file)" is that job
  on the one-packet file: its own start (Spark's three planning processes, see source.py); "data
  source local[1], pyspark's session" (--all) is that job in a session built with pyspark's
  defaults, as a user's own job is (no fast-start JVM flags, class archive or warm daemon);
- the set's biggest file (≥ 1 GB) alone on local[1] and on local[2], where the planner splits it
  into two connection shards;
- start: `kinspect spark` on a one-packet-file set (pcaps/librdkafka-mtu1500.pcap): JVM start,
  session, one task and the writes; the fixed cost reported apart. Every run maps the JVM's class
  archive (kinspect/spark/jvmcache.py), made once after a first run in an empty cache; "start, no
  class archive" runs without one (KINSPECT_CACHE_DIR empty), as a user's first run does;
  "start, pyspark's daemon" runs pyspark's own Python daemon (--conf
  spark.python.daemon.module=pyspark.daemon): no imports done ahead, in a warm process or
  before the forks, and pyspark imported from its zip (kinspect/spark/daemon.py, warm.py).

    sudo python tests/bench/bench_spark.py               # the lead's run: ~10 min on 2 vCPUs (below)
    python tests/bench/bench_spark.py --all --rounds 2 --captures A.pcap B.pcap ... --big A.pcap
    python tests/bench/bench_spark.py --all --rounds 3 --within 0 --captures ~/.cache/kinspect-bench/{\
        bench-1m.pcap,bench-1m.first511540.pcap,bench-loopback.pcap,bench-loopback.first28354.pcap,\
        bench-4g.pcap}                                   # 6.70 GB (bench-4g: tests/bench/README.md)

The default set (session 25's, 1.87 GB in four files, each linked into one directory):
~/.cache/kinspect-bench/bench-loopback.pcap (loopback, 4-64 KB segments; sudo python
tools/record_loopback_capture.py) and its first-28232-packets prefix (tests/bench/prefixes.py
makes prefixes with editcap), bench-small-produce.pcap (small Produce requests) and its x4 copy.
The default runs, all local[1]: the two starts, the plain loop, `kinspect spark` and the data
source, interleaved, 3 rounds unless the next round would end after ``--within`` seconds (600; 0:
no limit), 2 at least. The JVM's class archive is kept in ~/.cache/kinspect-bench/spark-jvm-cache
(``--cache``): made by the first run ever (round 0), mapped by every later one. Run as root (the
cgroup): without it, the CPU of Spark's Python workers is not all counted.

``--all`` adds local[2], the big file alone on local[1] and local[2], the start without the class
archive, the start with pyspark's daemon, and the data source in pyspark's session. ``--only`` runs some of the runs (names as in the
table, e.g. --only "start (1 small file)" "plain loop"); ``--code REF ...`` runs kinspect as
committed at each REF (a snapshot: tests/bench/measure.py), the Spark runs once per REF in every
round, interleaved, so a change is measured against its base on the same machine minutes apart.

Every run is a child process, runs interleaved per round. Per run: wall, the child's CPU
(os.wait4: Python, the JVM and what they reaped), and the machine's busy CPU over the run
(/proc/stat; Spark's Python workers are the JVM's grandchildren and not all reaped in time, so
this is the run's CPU on a quiet machine: check others_cores, the CPU others used meanwhile,
estimated as that less the child's own). Throughput is capture MB per wall second; scaling is
local[1]'s wall over local[2]'s; overhead is local[1] over plain, with and without the start
cost. Where a cpuacct cgroup can be made (cgroup v1, as root), each run is started in one of its
own: its CPU is then that of every process it started (the driver, the JVM, Spark's Python
daemons and workers, however they were reaped), whatever else the machine runs, and the JVM's
own CPU is sampled from /proc every 0.2 s (its last 0.2 s may be missed). Per core: capture MB
per CPU-second of the whole run once the start's CPU is taken out; the projection is that times a
cluster's cores, an upper bound (storage and network bandwidth are not modelled; the start is
paid once per run, not per core). Without a cgroup, the projection uses local[2]'s wall time. Writes
tests/bench/results/spark-<date>.json and .md. Run it on a quiet machine (load < 0.5).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # after PYTHONPATH: a snapshot's kinspect there comes first (--code)
    sys.path.append(str(REPO))

from tests.bench.measure import machine_facts, run_child, snapshot_kinspect  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CACHE = Path.home() / ".cache" / "kinspect-bench"
DEFAULT_SET = ["bench-loopback.pcap", "bench-small-produce.pcap", "bench-small-produce.x4.pcap",
               "bench-loopback.first28232.pcap"]
JVM_CACHE = CACHE / "spark-jvm-cache"  # the class archive, kept between benchmarks
DEFAULT_RUNS = ("start (1 small file)", "data source start (1 small file)", "plain loop", "local[1]",
                "data source local[1]")
WITHIN_S = 600  # the default runs' rounds: 3 if they end within this, 2 at least
TINY = REPO / "pcaps" / "librdkafka-mtu1500.pcap"
CLUSTER_CORES = (8, 32, 128)
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class TreeCpu:
    """A cpuacct cgroup for one run (see the docstring): ``wrap(argv)`` starts argv in it;
    ``finish()`` waits for its processes to end (at most ``linger`` s: an orphaned idle daemon may
    stay) and gives (CPU s of every process, CPU s of the JVM)."""

    def __init__(self, name: str, linger: float = 30.0):
        self.path = CPUACCT / name
        self.path.mkdir()
        self.linger, self.jvm, self._done = linger, {}, threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    @staticmethod
    def available() -> bool:
        try:
            probe = CPUACCT / f"kinspect-bench-probe-{os.getpid()}"
            probe.mkdir()
            probe.rmdir()
            return True
        except OSError:
            return False

    def wrap(self, argv: list[str]) -> list[str]:
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path), *argv]

    def _pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def _sample(self) -> None:
        ticks = os.sysconf("SC_CLK_TCK")
        while not self._done.wait(0.2):
            for pid in self._pids():
                try:
                    stat = Path(f"/proc/{pid}/stat").read_text()
                except OSError:
                    continue
                name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat.rsplit(")", 1)[1].split()
                if name == "java":
                    self.jvm[pid] = max(self.jvm.get(pid, 0), (int(fields[11]) + int(fields[12])) / ticks)

    def finish(self) -> tuple[float, float]:
        deadline = time.monotonic() + self.linger
        while self._pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        self._done.set()
        self._sampler.join()
        cpu = int((self.path / "cpuacct.usage").read_text()) / 1e9
        try:
            self.path.rmdir()
        except OSError:  # a process still in it (the class archive's dump): tried again at the exit
            import atexit
            atexit.register(self._remove_later)
        return round(cpu, 2), round(sum(self.jvm.values()), 2)

    def _remove_later(self, within: float = 900.0) -> None:
        """A cgroup v1 directory stays after its processes have ended: removed once they have."""
        deadline = time.monotonic() + within
        while self._pids() and time.monotonic() < deadline:
            time.sleep(1)
        try:
            self.path.rmdir()
        except OSError:
            print(f"left behind: {self.path} (rmdir it once its processes have ended)", flush=True)


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


def source_job(out: str, files: list[str], own_session: bool = False) -> None:
    """A user's job on local[1]: spark.read.format("kinspect") (kinspect/spark/source.py), the
    exchanges written as kinspect spark writes them (Parquet partitioned by api_name). The session
    is kinspect's (job.session: the JVM's flags and class archive, the warm daemon), or with
    ``own_session`` one a user builds with pyspark's defaults (the UI off)."""
    from kinspect.spark import job, register
    if own_session:
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.master("local[1]").appName("bench source").config(
            "spark.ui.enabled", "false").getOrCreate()
    else:
        spark = job.session("local[1]", app="bench source")
    register(spark)
    (spark.read.format("kinspect").load(files).write.partitionBy("api_name")
     .parquet(os.path.join(out, "exchanges")))
    spark.stop() if own_session else job.stop(spark)


def _capture_set(paths: list[Path], into: Path) -> Path:
    into.mkdir()
    for path in paths:
        (into / path.name).symlink_to(path.resolve())
    return into


def _first_run(cache: Path, out: Path, code: Path | None) -> dict:
    """The first run with an empty ``cache``: it lists the JVM's classes, and a background process
    makes the class archive (kinspect/spark/jvmcache.py) that every later run maps. Waits for it."""
    row = _run("first run, archive made after", _spark([TINY], out, "local[1]"), TINY.stat().st_size,
               {"KINSPECT_CACHE_DIR": str(cache)}, code)
    started = time.perf_counter()
    while not list(cache.glob("spark-jvm/*.jsa")) and time.perf_counter() - started < 900:
        time.sleep(0.5)
    row["archive_made_after_s"] = round(time.perf_counter() - started, 1)
    print(f"  class archive made {row['archive_made_after_s']} s after the first run", flush=True)
    return row


_runs = 0  # runs started: each cgroup's name


def _run(name: str, argv: list[str], size: int, env: dict | None = None, code: Path | None = None) -> dict:
    """One run; ``code``: the snapshot whose kinspect it runs (first on PYTHONPATH, which Spark's
    JVM and its Python workers inherit)."""
    global _runs
    _runs += 1
    started = time.strftime("%H:%M:%S")
    env = {**(env or {}), **({"PYTHONPATH": f"{code}:{REPO}"} if code else {})}
    tree = TreeCpu(f"kinspect-bench-{os.getpid()}-{_runs}") if TreeCpu.available() else None
    run = run_child(tree.wrap(argv) if tree else argv, env=env, cwd=code or REPO)
    tree_cpu, jvm_cpu = tree.finish() if tree else (None, None)
    if run.exit_code != 0:
        raise SystemExit(f"{name}: exit {run.exit_code}: {' '.join(argv)}")
    busy = run.cpu_s + run.others_cpu_s
    row = {"run": name, "started": started, **run.to_dict(), "machine_busy_cpu_s": round(busy, 2),
           "tree_cpu_s": tree_cpu, "jvm_cpu_s": jvm_cpu, "mb_per_s": round(size / 1e6 / run.wall_s, 1)}
    print(f"  {name:<32} {run.wall_s:8.1f} s wall {row['mb_per_s']:7.1f} MB/s  cpu(all processes) {tree_cpu} s  "
          f"jvm {jvm_cpu} s  machine busy {busy:7.1f} s  others {run.others_cores:.2f} cores", flush=True)
    return row


def _spark(inputs, out: Path, master: str) -> list[str]:
    return [sys.executable, "-m", "kinspect", "spark", *map(str, inputs), "--out", str(out), "--master", master]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captures", nargs="+", type=Path, help="the capture set (default: the cached bench set)")
    parser.add_argument("--big", type=Path, help="the big file run alone (default: the set's largest)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--within", type=float, default=WITHIN_S, help="no round started that would end after "
                        "this many seconds (by the rounds so far; 2 rounds at least; 0: no limit)")
    parser.add_argument("--all", action="store_true", help="every run, not only the default ones")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--cache", type=Path, default=JVM_CACHE, help="the JVM's class archive's cache "
                        "(KINSPECT_CACHE_DIR): the first run in an empty one makes the archive (round 0)")
    parser.add_argument("--only", nargs="+", metavar="RUN", help="only these runs (their names in the table)")
    parser.add_argument("--code", nargs="+", metavar="REF", help="kinspect as committed at each REF, interleaved")
    parser.add_argument("--plain-loop", nargs="+", metavar=("OUT", "FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--source-job", nargs="+", metavar=("OUT", "FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--own-session", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_loop:
        plain_loop(args.plain_loop[0], args.plain_loop[1:])
        return
    if args.source_job:
        source_job(args.source_job[0], args.source_job[1:], args.own_session)
        return
    captures = [c.resolve() for c in args.captures or [CACHE / name for name in DEFAULT_SET]]
    missing = [str(c) for c in captures if not c.is_file()]
    if missing:
        raise SystemExit(f"missing captures: {missing} (record them: see this file's docstring)")
    big = args.big or max(captures, key=lambda c: c.stat().st_size)
    size = sum(c.stat().st_size for c in captures)
    big_size = big.stat().st_size
    facts = machine_facts()
    only = args.only or (None if args.all else DEFAULT_RUNS)
    began = time.perf_counter()
    print(f"{len(captures)} captures, {size / 1e9:.2f} GB; big file {big.name} {big_size / 1e9:.2f} GB; "
          f"load average {facts['load_average']}", flush=True)
    rows = []
    stamp = time.strftime("%Y%m%d-%H%M")
    args.results.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        tmp = Path(tmp)
        codes = {ref: tmp / f"code-{i}" for i, ref in enumerate(args.code)} if args.code else {"": None}
        if args.code:
            facts["kinspect"] = {ref: snapshot_kinspect(path, ref) for ref, path in codes.items()}
        inputs = _capture_set(captures, tmp / "set")
        cache = args.cache
        cache.mkdir(parents=True, exist_ok=True)
        if not list(cache.glob("spark-jvm/*.jsa")):
            rows.append({"round": 0, **_first_run(cache, tmp / "first", next(iter(codes.values())))})
        rounds_began = time.perf_counter()
        for round_ in range(args.rounds):
            per_round = (time.perf_counter() - rounds_began) / round_ if round_ else 0
            if round_ >= 2 and args.within and time.perf_counter() - began + per_round > args.within:
                print(f"round {round_ + 1} left out: it would end after {args.within:.0f} s", flush=True)
                break
            out = tmp / f"round{round_}"
            out.mkdir()
            print(f"round {round_ + 1}", flush=True)
            for i, (ref, code) in enumerate(codes.items()):
                at = f" @{ref}" if args.code and len(codes) > 1 else ""
                mine = out / f"code{i}"
                mine.mkdir()
                runs = [
                    ("start (1 small file)", _spark([TINY], mine / "start", "local[1]"), TINY.stat().st_size),
                    ("start, no class archive", _spark([TINY], mine / "start-cold", "local[1]"), TINY.stat().st_size),
                    ("start, pyspark's daemon", _spark([TINY], mine / "start-pyspark-daemon", "local[1]")
                     + ["--conf", "spark.python.daemon.module=pyspark.daemon"], TINY.stat().st_size),
                    ("data source start (1 small file)", [sys.executable, __file__, "--source-job",
                                                          str(mine / "source-start"), str(TINY)], TINY.stat().st_size),
                    ("plain loop", [sys.executable, __file__, "--plain-loop", str(mine / "plain"),
                                    *map(str, captures)], size),
                    ("local[1]", _spark([inputs], mine / "l1", "local[1]"), size),
                    ("data source local[1]", [sys.executable, __file__, "--source-job", str(mine / "source"),
                                              *map(str, captures)], size),
                    ("data source local[1], pyspark's session", [sys.executable, __file__, "--source-job",
                                                                str(mine / "source-own"), *map(str, captures),
                                                                "--own-session"], size),
                    ("local[2]", _spark([inputs], mine / "l2", "local[2]"), size),
                    ("big file local[1]", _spark([big], mine / "b1", "local[1]"), big_size),
                    ("big file local[2]", _spark([big], mine / "b2", "local[2]"), big_size),
                ]
                for name, argv, n in runs:
                    if only and name not in only or (name == "plain loop" and i):  # the plain loop: once
                        continue
                    archive = "" if "no class archive" in name else str(cache)  # "": none (jvmcache)
                    rows.append({"round": round_ + 1, "code": ref or None,
                                 **_run(name + ("" if name == "plain loop" else at), argv, n,
                                        {"KINSPECT_CACHE_DIR": archive}, code)})
                    _save(args.results / f"spark-{stamp}.json", captures, big, facts, rows)
            _same_rows(out)
    result = _save(args.results / f"spark-{stamp}.json", captures, big, facts, rows)
    result["report"] = _report(rows, size, big_size)
    (args.results / f"spark-{stamp}.json").write_text(json.dumps(result, indent=1))
    (args.results / f"spark-{stamp}.md").write_text(_markdown(result))
    print(_markdown(result))


def _save(path: Path, captures, big, facts, rows) -> dict:
    """The runs so far, written after each one: a benchmark cut short keeps them."""
    result = {"captures": [{"path": str(c), "bytes": c.stat().st_size} for c in captures], "big": str(big),
              "machine": facts, "load_after": os.getloadavg(), "runs": rows}
    path.write_text(json.dumps(result, indent=1))
    return result


def _same_rows(out: Path) -> None:
    """Every run of a round wrote the same exchanges (counted per api_name partition), whatever
    the code (--code): the set's runs alike, the big file's alike."""
    import pyarrow.dataset as ds

    def counts(path):
        table = ds.dataset(path / "exchanges", format="parquet", partitioning="hive").to_table(columns=["api_name"])
        return sorted((r["api_name"], r["api_name_count"])
                      for r in table.group_by("api_name").aggregate([("api_name", "count")]).to_pylist())
    for names, what in ((("plain", "l1", "l2", "source", "source-own"), "the runs"), (("b1", "b2"), "the sharded big file's runs")):
        found = [counts(path) for name in names for path in sorted(out.glob(f"*/{name}"))]
        assert all(c == found[0] for c in found), f"{what} wrote different rows"


def _median(rows, name, field="wall_s") -> float | None:
    values = [r[field] for r in rows if r["run"] == name and r["round"] and r.get(field) is not None]
    return statistics.median(values) if values else None


def _ratio(a, b, digits=3):
    return round(a / b, digits) if a is not None and b else None


def _less(a, b):
    return a - b if a is not None and b is not None else None


def _report(rows: list[dict], size: int, big_size: int) -> dict:
    """The figures of each code (--code; one: ``""``), every one that its runs allow."""
    refs = list(dict.fromkeys(r.get("code") for r in rows if r["round"]))
    several = len(refs) > 1
    return {ref or "": _report_one(rows, size, big_size, f" @{ref}" if several else "") for ref in refs}


def _report_one(rows: list[dict], size: int, big_size: int, at: str) -> dict:
    def wall(name):
        return _median(rows, name + at)

    def cpu(name, field="tree_cpu_s"):
        return _median(rows, name + at, field)
    start, cold, pyspark_daemon = wall("start (1 small file)"), wall("start, no class archive"), \
        wall("start, pyspark's daemon")
    plain = _median(rows, "plain loop")
    l1, source, l2 = wall("local[1]"), wall("data source local[1]"), wall("local[2]")
    b1, b2 = wall("big file local[1]"), wall("big file local[2]")
    start_cpu, plain_cpu = cpu("start (1 small file)"), _median(rows, "plain loop", "tree_cpu_s")
    source_start, source_start_cpu = wall("data source start (1 small file)"), cpu("data source start (1 small file)")
    starts = {"local1": (start, start_cpu), "source": (source_start or start, source_start_cpu or start_cpu)}
    report = {
        "start_s": start, "start_without_class_archive_s": cold, "start_with_pysparks_daemon_s": pyspark_daemon,
        "start_cpu_s": start_cpu, "start_jvm_cpu_s": cpu("start (1 small file)", "jvm_cpu_s"),
        "source_start_s": source_start, "source_start_cpu_s": source_start_cpu,
        "source_start_jvm_cpu_s": cpu("data source start (1 small file)", "jvm_cpu_s"),
        "source_start_less_start_cpu_s": _less(source_start_cpu, start_cpu) and round(_less(source_start_cpu, start_cpu), 2),
        "throughput_mb_s": {k: round(size / 1e6 / v, 1) for k, v in
                            (("plain", plain), ("local[1]", l1), ("data source", source), ("local[2]", l2)) if v},
        "target_local1_over_plain": 1.15,
        "local1_over_plain": _ratio(l1, plain), "local1_less_start_over_plain": _ratio(_less(l1, start), plain),
        "source_local1_over_plain": _ratio(source, plain),
        "source_local1_less_start_over_plain": _ratio(_less(source, starts["source"][0]), plain),
        "scaling_local2_over_local1": _ratio(l1, l2, 2), "target_scaling": 1.8,
        "scaling_less_start": _ratio(_less(l1, start), _less(l2, start), 2),
        "big_file_local2_speedup": _ratio(b1, b2, 2), "target_big_file_speedup": 1.7,
        "big_file_speedup_less_start": _ratio(_less(b1, start), _less(b2, start), 2),
    }
    for key, name in (("local1", "local[1]"), ("source", "data source local[1]")):
        run_cpu, jvm = cpu(name), cpu(name, "jvm_cpu_s")
        report[f"cpu_{key}_over_plain"] = _ratio(run_cpu, plain_cpu)
        report[f"cpu_{key}_less_start_over_plain"] = _ratio(_less(run_cpu, starts[key][1]), plain_cpu)
        report[f"jvm_share_{key}"] = _ratio(jvm, run_cpu)
        report[f"jvm_cpu_{key}_s"] = jvm
    # per core: MB per CPU-second of every process of local[1], the start's CPU out (cgroup runs);
    # without them, local[2]'s wall time after the start over its two cores
    work_cpu = _less(cpu("local[1]"), start_cpu)
    if work_cpu:
        per_core = size / 1e6 / work_cpu
    elif l2 and start and l2 > 2 * start:
        per_core = size / 1e6 / (l2 - start) / 2
    else:
        per_core = None
    own = "data source local[1], pyspark's session"
    report["source_own_session_over_plain"] = _ratio(wall(own), plain)
    report["cpu_source_own_session_over_plain"] = _ratio(cpu(own), plain_cpu)
    report["jvm_share_source_own_session"] = _ratio(cpu(own, "jvm_cpu_s"), cpu(own))
    report["per_core_mb_s_after_start"] = per_core and round(per_core, 1)
    source_work = _less(cpu("data source local[1]"), starts["source"][1])
    report["source_per_core_mb_s_after_start"] = _ratio(size / 1e6, source_work, 1)
    report["plain_mb_per_cpu_s"] = _ratio(size / 1e6, plain_cpu, 1)
    report["projection_mb_s"] = per_core and {f"{n} cores": round(per_core * n, 0) for n in CLUSTER_CORES}
    return report


def _markdown(result: dict) -> str:
    lines = [f"# kinspect spark benchmark ({len(result['captures'])} captures, "
             f"{sum(c['bytes'] for c in result['captures']) / 1e9:.2f} GB)", "",
             f"Machine: {result['machine']['nproc']} CPUs, {result['machine']['cpu_model']}, load average before "
             f"{result['machine']['load_average']}, after {result['load_after']}", "",
             "| round | run | wall s | MB/s | CPU s, all processes (cgroup) | JVM CPU s | CPU s (wait4) | "
             "machine busy CPU s | others' cores | peak memory MB (all processes, PSS) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["runs"]:
        cells = [row["round"], row["run"], row["wall_s"], row["mb_per_s"], row.get("tree_cpu_s"), row.get("jvm_cpu_s"),
                 row["cpu_s"], row["machine_busy_cpu_s"], row["others_cores"], row.get("peak_tree_pss_mb")]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    for ref, r in result["report"].items():
        lines += ["", f"## {('kinspect at ' + ref) if ref else 'Figures'} (medians of the rounds)", ""]
        lines += [line for line in _figures(r) if line]
    return "\n".join(lines) + "\n"

def _figures(r: dict) -> list[str | None]:
    """The report's lines; those of runs not made are None."""
    return [
        r["start_s"] and f"- start (JVM, session, one task, writes): {r['start_s']} s, {r['start_cpu_s']} CPU s (JVM "
        f"{r['start_jvm_cpu_s']})" + (f"; without the JVM's class archive (jvmcache.py): "
                                      f"{r['start_without_class_archive_s']} s" if r['start_without_class_archive_s']
                                      else "") + (f"; with pyspark's daemon: {r['start_with_pysparks_daemon_s']} s"
                                                  if r['start_with_pysparks_daemon_s'] else ""),
        r["source_start_s"] and f"- the data source's start (a user's read and write of the small file): "
        f"{r['source_start_s']} s, {r['source_start_cpu_s']} CPU s (JVM {r['source_start_jvm_cpu_s']}); "
        f"{r['source_start_less_start_cpu_s']} CPU s more than `kinspect spark`'s (Spark's planning processes)",
        f"- throughput MB/s (wall): {r['throughput_mb_s']}",
        r["local1_over_plain"] and f"- `kinspect spark` local[1] over the plain loop: wall {r['local1_over_plain']} "
        f"(target ≤ {r['target_local1_over_plain']}), {r['local1_less_start_over_plain']} without the start; "
        f"CPU (all processes) {r['cpu_local1_over_plain']}, {r['cpu_local1_less_start_over_plain']} without the "
        f"start's; the JVM's share of its CPU: {r['jvm_share_local1']}",
        r["source_local1_over_plain"] and f"- data source (spark.read.format(\"kinspect\"), local[1]) over the plain "
        f"loop: wall {r['source_local1_over_plain']} (target ≤ {r['target_local1_over_plain']}), "
        f"{r['source_local1_less_start_over_plain']} without its start; CPU {r['cpu_source_over_plain']}, "
        f"{r['cpu_source_less_start_over_plain']} without its start's; the JVM's share: {r['jvm_share_source']}",
        r.get("source_own_session_over_plain") and f"- the data source in a session of pyspark's defaults over the "
        f"plain loop (its start included): wall {r['source_own_session_over_plain']}, CPU "
        f"{r['cpu_source_own_session_over_plain']}; the JVM's share: {r['jvm_share_source_own_session']}",
        r["scaling_local2_over_local1"] and f"- local[2] / local[1] scaling: {r['scaling_local2_over_local1']}x "
        f"(target ≥ {r['target_scaling']}); without the start: {r['scaling_less_start']}x",
        r["big_file_local2_speedup"] and f"- big file alone, local[2] speed-up: {r['big_file_local2_speedup']}x "
        f"(target ≥ {r['target_big_file_speedup']}); without the start: {r['big_file_speedup_less_start']}x",
        r["per_core_mb_s_after_start"] and f"- per core after the start: {r['per_core_mb_s_after_start']} MB per CPU-second of all processes "
        f"(`kinspect spark` local[1]; the data source: {r['source_per_core_mb_s_after_start']}; the plain loop: "
        f"{r['plain_mb_per_cpu_s']}); projected upper bound {r['projection_mb_s']} MB/s",
    ]


if __name__ == "__main__":
    main()
