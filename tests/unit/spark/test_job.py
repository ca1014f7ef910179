"""job.py on a real local[2] Spark: the written tables equal one process's decode."""

import json
import os
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from kinspect.spark import job
from kinspect.spark.plan import Input, Unit, list_inputs, plan
from kinspect.spark.rows import EXCHANGES
from kinspect.spark.task import file_rows
from tests.conftest import PCAPS, REALDATA

CAPTURES = sorted(p for p in PCAPS.iterdir() if p.suffix in (".pcap", ".pcapng")) + \
    [REALDATA / "arkime/kafka.pcap", REALDATA / "go-sniffer/kafka.pcap", REALDATA / "ndpi/kafka.pcapng"]


def _key(row: dict) -> str:
    return json.dumps({name: row[name] for name in EXCHANGES.names}, sort_keys=True)


def _expected() -> list[dict]:
    """Single-process rows (equal to decode --json's lines: test_rows.py)."""
    return [r for c in CAPTURES for r in file_rows(Input(str(c), c.stat().st_size)) if r["table"] == "exchanges"]


def _by_conn(rows):
    out = defaultdict(list)
    for row in sorted(rows, key=lambda r: (r["request_time"], r["correlation_id"])):
        out[(row["capture"], row["conn"])].append(_key(row))
    return out


def _written(spark_session, tmp_path_factory, records: bool):
    inputs = list_inputs([str(c) for c in CAPTURES])
    units = plan(inputs, cores=2, target=100_000, factor=2)  # packs the small captures, shards the big ones
    out = tmp_path_factory.mktemp("spark") / "out"
    return units, job.write(spark_session, units, str(out), records=records), out


@pytest.fixture(scope="module")
def tables(spark_session, tmp_path_factory):
    """Every capture written once by local[2] with --records, all rows kept between the
    tables: (units, written, out)."""
    return _written(spark_session, tmp_path_factory, records=True)


@pytest.fixture(scope="module")
def streamed(spark_session, tmp_path_factory):
    """The same without --records: exchanges written as they come, files rows through the
    accumulator."""
    return _written(spark_session, tmp_path_factory, records=False)


@pytest.mark.parametrize("way", ["tables", "streamed"])
def test_local2_rows_equal_one_process_with_packed_and_sharded_files(way, request):
    units, written, out = request.getfixturevalue(way)
    assert any(u.shards > 1 for u in units) and any(len(u.files) > 1 for u in units)
    table = ds.dataset(out / "exchanges", format="parquet", partitioning="hive").to_table()
    rows = table.to_pylist()
    expected = _expected()
    assert Counter(map(_key, rows)) == Counter(map(_key, expected))
    assert _by_conn(rows) == _by_conn(expected)
    files = ds.dataset(out / "files", format="parquet").to_table().to_pylist()
    assert sorted(f["path"] for f in files) == sorted(str(c) for c in CAPTURES)
    per_file = Counter(r["capture"] for r in expected)
    assert {f["path"]: f["exchanges"] for f in files} == {str(c): per_file[str(c)] for c in CAPTURES}
    assert {f["path"]: f["bytes"] for f in files} == {str(c): c.stat().st_size for c in CAPTURES}
    split = {f.path for u in units if u.shards > 1 for f in u.files}
    assert {f["path"] for f in files if f["shards"] == 2} == split
    assert written.exchanges == len(expected) and not written.unreadable
    assert written.files == files  # what the CLI reports is what was written


def test_records_table_equals_one_process_with_packed_and_sharded_files(tables):
    from kinspect.spark.rows import RECORD_COLUMNS, RECORDS
    _, _, out = tables
    table = ds.dataset(out / "records", format="parquet").to_table()
    assert table.schema.names == RECORDS.names
    got = Counter(tuple(r.values()) for r in table.to_pylist())
    expected = Counter(tuple(r[c] for c in RECORD_COLUMNS) for capture in CAPTURES
                       for r in file_rows(Input(str(capture), 0), records=True) if r["table"] == "records")
    assert got == expected and sum(expected.values()) > 500


TOMBSTONES = Path(__file__).parent / "data" / "tombstones.pcap"  # tests/integration/test_spark_records_lab.py


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_tombstones_value_size_is_null_and_an_empty_values_zero(spark_session, tmp_path, fmt):
    """A real capture (Apache Kafka 4, confluent-kafka): a tombstone (null value), an empty value
    and a 3-byte value with one header, produced in one batch and fetched back at offsets 0-2.
    Literal values, from what the producer sent (its manifest), not from rows.py."""
    out = tmp_path / "out"
    job.write(spark_session, plan(list_inputs([str(TOMBSTONES)]), cores=2), str(out), fmt=fmt, records=True)
    rows = job.read_records(spark_session, str(out), fmt).where("topic = 'lab-tombstones'").collect()
    got = sorted((r["side"], r["correlation_id"], r["offset"], bytes(r["key"]), r["value_size"], r["header_count"])
                 for r in rows)
    produce = [r for r in got if r[0] == "request"]
    fetched = {r[2:] for r in got if r[0] == "response"}
    assert [r[3:] for r in produce] == [(b"tombstone", None, 0), (b"empty", 0, 0), (b"full", 3, 1)]
    assert fetched == {(0, b"tombstone", None, 0), (1, b"empty", 0, 0), (2, b"full", 3, 1)}


def test_local_tasks_get_the_key_logs_index_not_its_secrets(tmp_path):
    """Local tasks get the driver's index of the key-log file (no secret in it, a fraction of its
    size) and read a connection's lines from the file; a cluster's executors, which may not see
    the file, get every secret. Every task used to get every secret (issue 30 item 4)."""
    import os
    import pickle
    import subprocess
    import sys

    from kinspect.tls.keylog import KeyLog
    lines = [f"CLIENT_TRAFFIC_SECRET_0 {os.urandom(32).hex()} {os.urandom(32).hex()}" for _ in range(20_000)]
    path = tmp_path / "keys.log"
    path.write_text("\n".join(lines) + "\n")
    _, random, secret = lines[-1].split()
    keylog = KeyLog.from_files([path])
    shipped = pickle.dumps(job.shipped_keylog(keylog, local=True))
    assert secret.encode() not in shipped and bytes.fromhex(secret) not in shipped
    assert len(shipped) < path.stat().st_size // 4
    worker = ("import pickle, sys\n"
              "keylog = pickle.load(sys.stdin.buffer)\n"
              "print(keylog.get(bytes.fromhex(sys.argv[1]))['CLIENT_TRAFFIC_SECRET_0'].hex())\n")
    found = subprocess.run([sys.executable, "-c", worker, random], input=shipped, capture_output=True, timeout=60)
    assert found.stdout.decode().strip() == secret, found.stderr
    anywhere = pickle.loads(pickle.dumps(job.shipped_keylog(keylog, local=False)))
    path.unlink()
    assert anywhere.get(bytes.fromhex(random)) == {"CLIENT_TRAFFIC_SECRET_0": bytes.fromhex(secret)}


def _reachable_by_others(path: str) -> bool:
    """Whether another user could reach ``path``: every directory down to it lets others in."""
    import os
    import stat
    parts = os.path.realpath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        st = os.stat(os.sep.join(parts[:i]))
        if stat.S_ISDIR(st.st_mode) and not st.st_mode & (stat.S_IXGRP | stat.S_IXOTH):
            return False
    return True


def test_a_local_sparks_scratch_space_is_this_users_alone(spark_session):
    """Cached and shuffled blocks hold decoded rows: Spark kept them in /tmp/blockmgr-* (0755, its
    files 0644), and the JVM's temporary files in /tmp. Now both are in a 0700 directory of this
    process's."""
    jvm = spark_session.sparkContext._jvm
    blocks = [str(d) for d in jvm.org.apache.spark.SparkEnv.get().blockManager().diskBlockManager().localDirs()]
    temporary = jvm.java.lang.System.getProperty("java.io.tmpdir")
    assert blocks and not [path for path in [*blocks, temporary] if _reachable_by_others(path)]
    assert all(path.startswith(job.private_directory()) for path in [*blocks, temporary])


def test_jsonl_tables_hold_every_column(spark_session, tmp_path):
    capture = PCAPS / "librdkafka-produce-consume.pcapng"
    units = plan(list_inputs([str(capture)]), cores=2)
    job.write(spark_session, units, str(tmp_path / "out"), fmt="jsonl")
    lines = [json.loads(line) for part in sorted((tmp_path / "out" / "exchanges").glob("part-*"))
             for line in part.read_text().splitlines()]
    assert all(list(line) == EXCHANGES.names for line in lines)
    expected = [r for r in file_rows(Input(str(capture), 0)) if r["table"] == "exchanges"]
    assert Counter(map(_key, lines)) == Counter(map(_key, expected))


@pytest.mark.parametrize("master, expected", [("local", "local[1, 2]"), ("local[4]", "local[4, 2]"),
                                              ("local[*]", "local[*, 2]"), ("local[2, 3]", "local[2, 3]"),
                                              ("spark://h:7077", "spark://h:7077")])
def test_local_masters_retry_tasks(master, expected):
    assert job.local_master(master) == expected


def test_summary_equals_decode_summary_of_the_same_exchanges(spark_session, tables):
    """Spark's percentile_approx at the chosen accuracy gives decode --summary's nearest-rank values."""
    from kinspect.decode.finish import SUMMARY, finish_record
    from kinspect.decode.pipeline import DecodeRun
    from kinspect.spark import summary
    from kinspect.decode.summary import Summary
    from kinspect.wire.topics import TopicNames

    _, _, out = tables
    rows = summary.write(summary.summarize(job.read_exchanges(spark_session, str(out))), str(out))
    expected = Summary()
    for capture in CAPTURES:  # decode --summary's own path, one capture after another
        run = DecodeRun(str(capture))
        topics = TopicNames()
        for record in run.raw_records():
            output, _ = finish_record(record, topics, lambda r: True, SUMMARY)
            expected.add(output)
    want = {r["api_name"]: {k: v for k, v in r.items() if k != "type"} for r in expected.rows()}
    got = {r["api_name"]: r for r in rows["apis"]}
    assert got == want
    assert sorted((r["api_name"], r["error"], r["topic"], r["count"]) for r in rows["errors"]) == \
        sorted((r["api_name"], r["error"], r["topic"], r["count"]) for r in expected.error_rows())
    assert rows["errors"]  # the captures hold errors (kafka-python-legacy-rejected, java-transactions)
    by_client = Counter()
    for r in _expected():
        by_client[r["client_id"] or ""] += (r["request_size"] or 0) + (r["response_size"] or 0)
    top = sorted(by_client.items(), key=lambda kv: (-kv[1], kv[0]))[:summary.TOP_TALKERS]
    assert [(r["client_id"], r["bytes"]) for r in rows["talkers"]] == top
    assert (out / "summary" / "apis").is_dir()
    text = summary.render(rows)
    assert "Exchanges by API" in text and "Top talkers by bytes" in text


def test_accuracy_is_above_the_largest_group_within_bounds():
    from kinspect.spark.summary import EXACT_LATENCIES, accuracy
    assert accuracy(5) == 10_000 and accuracy(50_000) == 50_001 and accuracy(10**9) == EXACT_LATENCIES


def test_progress_maps_task_counts_to_files_and_bytes():
    from kinspect.spark.progress import Done, done, totals
    big = Input("big", 1000)
    units = [Unit((big,), 0, 2), Unit((big,), 1, 2), Unit((Input("a", 300), Input("b", 100))), Unit((Input("c", 50),))]
    assert totals(units) == Done(4, 4, 1450)
    assert done(units, 0, 2) == Done(0, 0, 0)
    # 3 launched, 1 completed: the smallest launched (a+b) is taken as done
    assert done(units, 1, 2) == Done(1, 2, 400)
    # all 4 launched, 2 completed: a+b and c; the big file's shards still run
    assert done(units, 2, 2) == Done(2, 3, 450)
    assert done(units, 3, 1) == Done(3, 3, 950)  # one shard of big: its file is not done yet
    assert done(units, 4, 0) == totals(units) == done(units, 9, 0)


def test_progress_reads_the_status_tracker_of_a_real_job(spark_session, tmp_path):
    """job.write's progress: Spark's status tracker figures for the decode job, mapped to files
    and bytes; at the end every file and byte."""
    from kinspect.spark.progress import Done, totals, tracker_figures
    inputs = list_inputs([str(c) for c in CAPTURES])
    units = plan(inputs, cores=2, target=100_000, factor=2)
    seen: list[Done] = []
    job.write(spark_session, units, str(tmp_path / "out"), progress=seen.append)
    assert seen and seen[-1] == totals(units) == Done(len(units), len(CAPTURES), sum(f.size for f in inputs))
    assert all(a.bytes <= b.bytes and a.tasks <= b.tasks for a, b in zip(seen, seen[1:]))
    # the tracker itself, after a job in a group: the stage of len(units) tasks, all completed
    sc = spark_session.sparkContext
    sc.setJobGroup("kinspect-test-group", "test")
    try:
        job.decoded(spark_session, units[:3]).count()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert tracker_figures(sc, "kinspect-test-group", 3) == (3, 0)
    assert tracker_figures(sc, "no-such-group", 3) is None


def test_summary_clients_and_topics_equal_a_plain_computation(spark_session, tables):
    """Per client and API latencies (nearest rank) and traffic per topic, from the same rows."""
    from kinspect.spark import summary
    from kinspect.decode.summary import percentile
    _, _, out = tables
    got = {name: [r.asDict() for r in df.collect()]
           for name, df in summary.summarize(job.read_exchanges(spark_session, str(out))).items()}
    rows = _expected()
    groups = defaultdict(list)
    for r in rows:
        groups[(r["client_id"] or "", r["api_name"])].append(r)
    want = {}
    for key, group in groups.items():
        latencies = sorted(r["latency_ms"] for r in group if r["latency_ms"] is not None)
        want[key] = (len(group), len(latencies), percentile(latencies, 50), percentile(latencies, 99),
                     max(latencies, default=None))
    assert {(r["client_id"], r["api_name"]): (r["count"], r["answered"], r["latency_p50_ms"], r["latency_p99_ms"],
                                              r["latency_max_ms"]) for r in got["clients"]} == want
    traffic = Counter()
    for r in rows:
        for topic in r["topics"]:
            traffic[(topic, None)] += (r["request_size"] or 0) + (r["response_size"] or 0)
        for topic_id in r["topic_ids"]:
            traffic[(None, topic_id)] += (r["request_size"] or 0) + (r["response_size"] or 0)
    assert {(r["topic"], r["topic_id"]): r["bytes"] for r in got["topics"]} == dict(traffic)


def test_summary_names_topic_ids_from_another_capture(spark_session, tmp_path):
    """A consumer's Fetch v18 names its topic by id; its Metadata response went over another
    connection. Split by connection into two captures (tshark), the Fetch capture alone cannot
    name the topic, but the summary over both does, as one run over the whole capture does."""
    import subprocess
    from kinspect.spark import summary
    whole = PCAPS / "java-console-consumer-kip848.pcap"
    fetch, rest = tmp_path / "fetch.pcap", tmp_path / "rest.pcap"
    for path, shown in ((fetch, "tcp.port==33816"), (rest, "not tcp.port==33816")):
        subprocess.run(["tshark", "-r", str(whole), "-Y", shown, "-F", "pcap", "-w", str(path)], check=True,
                       capture_output=True)
    alone = [r for r in file_rows(Input(str(fetch), 0)) if r["table"] == "exchanges" and r["api_name"] == "Fetch"]
    assert any(r["topic_ids"] and not r["topics"] for r in alone)
    job.write(spark_session, plan(list_inputs([str(fetch), str(rest)]), cores=2), str(tmp_path / "split"))
    job.write(spark_session, plan(list_inputs([str(whole)]), cores=2), str(tmp_path / "whole"))

    def topics(name):
        df = summary.summarize(job.read_exchanges(spark_session, str(tmp_path / name)))["topics"]
        return {(r["topic"], r["topic_id"]): (r["exchanges"], r["bytes"]) for r in df.collect()}
    assert topics("split") == topics("whole")
    assert ("java-lab", None) in topics("split") and not any(t is None for t, _ in topics("split"))


def test_the_local_jvm_runs_with_the_fast_start_flags(spark_session):
    """The driver JVM (local mode: executors in it) was started with job.FAST_START_JVM: read
    back from the JVM's own RuntimeMXBean, besides the log4j configuration."""
    jvm = spark_session.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(job.FAST_START_JVM) <= set(arguments), arguments
    assert any(a.startswith("-Dlog4j2.configurationFile=") for a in arguments)


def _parent_facts(batches):
    """A Python worker's parent (the daemon that forked it): its command line, and the shared
    libraries it mapped."""
    import os

    import pyarrow as pa
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        command = f.read().replace(b"\0", b" ").decode()
    with open(f"/proc/{os.getppid()}/maps") as f:
        maps = f.read()
    for _ in batches:
        yield pa.RecordBatch.from_pydict({"command": [command], "maps": [maps]})


def test_python_workers_are_forks_of_the_daemon_that_imported_the_decoder(spark_session):
    """The tasks' Python workers are forked by kinspect.spark.daemon (spark.python.daemon.module),
    which imported pyarrow and the decoder (its C accelerators) before it forked them."""
    import sys

    from pyspark import cloudpickle

    from kinspect.native import _packets
    pure_python = os.environ.get("KINSPECT_PURE_PYTHON") == "1"
    # by value: the workers never import from the working directory (job.SAFE_PATH), so not tests/
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        row = spark_session.range(1, numPartitions=1).mapInArrow(_parent_facts, "command string, maps string").first()
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert f"-m {job.DAEMON_MODULE} " in row["command"], row["command"]
    assert "/libarrow.so" in row["maps"]
    # the C accelerators, unless KINSPECT_PURE_PYTHON=1 (inherited by the workers) left them out
    assert (_packets.__file__ in row["maps"]) != pure_python


def _fresh_driver(tmp_path, source: str):
    """``source`` run as a script by a new Python: a driver that starts its own JVM."""
    import subprocess
    import sys
    script = tmp_path / "driver.py"
    script.write_text(source)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run


def test_a_new_jvms_first_daemon_is_the_warm_process_and_its_log_gives_errors_on_one_line(tmp_path):
    """One new driver, one JVM, two facts.

    - A driver that starts its JVM starts a warm daemon (warm.py) too: the first job's workers
      are its forks and import pyspark from the installed package (daemon.py), and once the
      session stops, the warm process has ended and its directory is gone.
    - A task that fails (a Python worker killed, say) is logged by Spark as an ERROR with the
      exception: the user sees one line with its cause, not the JVM's stack trace."""
    run = _fresh_driver(
        tmp_path,
        "import json, os\n"
        "from kinspect.spark import job\n"
        "def parent(batches):\n"
        "    import pyarrow as pa, pyspark\n"
        "    with open(f'/proc/{os.getppid()}/cmdline', 'rb') as f:\n"
        "        command = f.read().replace(b'\\0', b' ').decode()\n"
        "    for _ in batches:\n"
        "        yield pa.RecordBatch.from_pydict({'command': [command], 'pyspark': [pyspark.__file__]})\n"
        "spark = job.session('local[1]')\n"
        "warm = job._warm\n"
        "row = spark.range(1, numPartitions=1).mapInArrow(parent, 'command string, pyspark string').first()\n"
        "jvm = spark.sparkContext._jvm\n"
        "cause = jvm.java.io.IOException('Unexpected end of input')\n"
        "jvm.org.apache.logging.log4j.LogManager.getLogger('kinspect.test').error(\n"
        "    'Aborting task', jvm.java.lang.RuntimeException('Python worker exited unexpectedly', cause))\n"
        "job.stop(spark)\n"
        "print(json.dumps({'command': row['command'], 'pyspark': row['pyspark'], 'ended': warm.process.poll(),\n"
        "                  'directory': os.path.exists(warm.directory)}))\n")
    facts = json.loads(run.stdout.splitlines()[-1])
    assert f"-m {job.DAEMON_MODULE} --warm " in facts["command"], facts["command"]
    assert facts["ended"] is not None and not facts["directory"]
    import pyspark
    assert facts["pyspark"] == pyspark.__file__  # the installed package's, not Spark's pyspark.zip
    lines = [line for line in run.stderr.splitlines() if "kinspect.test" in line or "test:" in line]
    assert len(lines) == 1 and "ERROR" in lines[0] and "Aborting task" in lines[0]
    assert "Python worker exited unexpectedly" in lines[0]
    assert "\tat " not in run.stderr and "Caused by" not in run.stderr


def test_shards_that_might_differ_are_decoded_again_and_rows_equal_one_process(spark_session, tmp_path):
    """Split by connection, the Java producer's shards cannot name its topic (the Metadata came on
    the other shard's connection): the job finds it, removes those tasks' rows and decodes the file
    again with exchange-dealt shards; kafka39-legacy's three shards stand as they are."""
    producer, legacy = PCAPS / "java-console-producer.pcap", PCAPS / "kafka39-legacy.pcap"
    small = [PCAPS / "librdkafka-mtu1500.pcap", PCAPS / "java-console-consumer.pcap"]
    inputs = {c: Input(str(c), c.stat().st_size) for c in [producer, legacy, *small]}
    units = [Unit((inputs[legacy],), i, 3) for i in range(3)] + [Unit((inputs[producer],), i, 2) for i in range(2)] + \
        [Unit(tuple(inputs[c] for c in small))]
    for fmt in ("parquet", "jsonl"):
        out = tmp_path / fmt
        written = job.write(spark_session, units, str(out), fmt=fmt)
        assert list(written.redone) == [str(producer)]
        whole = {c: list(file_rows(inputs[c])) for c in inputs}
        expected = [r for c in inputs for r in whole[c] if r["table"] == "exchanges"]
        if fmt == "parquet":
            rows = ds.dataset(out / "exchanges", format="parquet", partitioning="hive").to_table().to_pylist()
            assert Counter(map(_key, rows)) == Counter(map(_key, expected))
        else:
            rows = [json.loads(line) for part in (out / "exchanges").glob("part-*") for line in part.open()]

            def ids(r):
                return r["capture"], r["conn"], r["api_name"], r["correlation_id"], tuple(r["topics"] or ())
            assert Counter(map(ids, rows)) == Counter(map(ids, expected))
        files = {f["path"]: f for f in written.files}
        for c in inputs:
            alone = whole[c][-1]
            assert (files[str(c)]["exchanges"], files[str(c)]["problems"], files[str(c)]["packets"]) == \
                (alone["file_exchanges"], alone["file_problems"], alone["file_packets"])
