"""The local JVM's class archive: named per Java and jars, made in the background from a real run's
class list, mapped by the next JVM, and never in the way when it is missing, stale or damaged."""

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from kinspect.spark import jvmcache
from tests.conftest import PCAPS


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KINSPECT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_one_archive_per_java_jars_and_jar_settings(cache_dir):
    stem = jvmcache.archive_stem({})
    assert stem is not None and os.path.dirname(stem) == str(cache_dir / "spark-jvm")
    assert jvmcache.archive_stem({"spark.executor.memory": "2g"}) == stem
    assert jvmcache.archive_stem({"spark.jars": "/x/hadoop-aws.jar"}) != stem
    assert jvmcache.archive_stem({}, ("-XX:+UseParallelGC",)) != stem
    assert oct((cache_dir / "spark-jvm").stat().st_mode & 0o777) == "0o700"


def test_no_cache_directory_means_no_archive(monkeypatch):
    monkeypatch.setenv("KINSPECT_CACHE_DIR", "")
    assert jvmcache.archive_stem({}) is None
    assert jvmcache.flags({}, create=True) == ([], None)


def test_flags_list_classes_only_when_asked_and_map_an_archive_once_there(cache_dir):
    assert jvmcache.flags({}) == ([], None)
    flags, listing = jvmcache.flags({}, create=True)
    stem = jvmcache.archive_stem({})
    assert flags == [f"-XX:DumpLoadedClassList={stem}.{os.getpid()}.classes"] and not listing.mapped
    archive = jvmcache.named(stem, 10)
    with open(archive, "wb") as f:
        f.write(b"an archive")
    flags, mapped = jvmcache.flags({}, create=True)
    assert mapped.mapped and mapped.path == archive
    assert f"-XX:SharedArchiveFile={archive}" in flags and "-XX:+VerifySharedSpaces" in flags and "-Xlog:cds=off" in flags


def test_an_archive_cut_short_is_removed_not_mapped(cache_dir):
    stem = jvmcache.archive_stem({})
    with open(jvmcache.named(stem, 1000), "wb") as f:
        f.write(b"cut short")
    assert jvmcache.flags({}) == ([], None)
    assert os.listdir(os.path.dirname(stem)) == []


def test_no_second_class_list_while_a_dump_runs(cache_dir):
    stem = jvmcache.archive_stem({})
    with open(stem + ".dumping", "w") as f:
        f.write(str(os.getpid()))  # a live process holds it
    assert jvmcache.flags({}, create=True) == ([], None)


def test_leftovers_of_processes_that_are_gone_are_removed(cache_dir):
    path = jvmcache.archive_stem({})
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    leftovers = [f"{path}.{gone}.classes", f"{path}.{gone}.tmp", path + ".dumping"]
    kept = f"{path}.{os.getpid()}.tmp"
    for name in leftovers + [kept]:
        with open(name, "w") as f:
            f.write(gone if name.endswith(".dumping") else "x")
    jvmcache.flags({})
    assert [os.path.exists(name) for name in leftovers] == [False, False, False]
    assert os.path.exists(kept)


def test_a_failed_dump_leaves_nothing(cache_dir, tmp_path):
    path = jvmcache.archive_stem({})
    classes = tmp_path / "listed.classes"
    classes.write_text("java/lang/Object\n")
    assert jvmcache.dump(path, str(classes), [jvmcache.java_executable(), "-XX:+NoSuchOption"]) == 1
    assert sorted(os.listdir(os.path.dirname(path))) == [] and not classes.exists()


def _session_maps(env) -> tuple[str, str]:
    """A local session in a new process: (the archive files its JVM maps, stderr)."""
    script = ("from kinspect.spark import job\n"
              "from pyspark import SparkContext\n"
              "s = job.session('local[1]')\n"
              "assert s.range(3).count() == 3\n"
              "maps = open(f'/proc/{SparkContext._gateway.proc.pid}/maps').read()\n"
              "print('mapped', sorted({l.split()[-1] for l in maps.splitlines() if l.endswith('.jsa')}))\n"
              "s.stop()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (mapped,) = [line for line in done.stdout.splitlines() if line.startswith("mapped ")]
    return mapped, done.stderr


def test_a_real_run_makes_the_archive_the_next_jvm_maps_and_a_damaged_one_is_dropped(tmp_path):
    env = dict(os.environ, KINSPECT_CACHE_DIR=str(tmp_path / "cache"))
    capture = PCAPS / "librdkafka-mtu1500.pcap"
    first = subprocess.run([sys.executable, "-m", "kinspect", "spark", str(capture), "--out", str(tmp_path / "a"),
                            "--master", "local[1]"], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "being saved in the background" in first.stderr
    assert "Traceback" not in first.stderr and "EOFError" not in first.stderr  # the JVM ended under pyspark
    directory = tmp_path / "cache" / "spark-jvm"
    deadline = time.monotonic() + 600  # about 30 s of CPU, at idle priority
    while not [p for p in directory.iterdir() if p.suffix == ".jsa"] and time.monotonic() < deadline:
        time.sleep(1)
    (archive,) = [p for p in directory.iterdir() if p.suffix == ".jsa"]
    while [p for p in directory.iterdir() if p.suffix != ".jsa"] and time.monotonic() < deadline:
        time.sleep(0.2)  # the dumper's lock and its class list go once the archive is in place
    assert sorted(p.name for p in directory.iterdir()) == [archive.name]

    # The JVMs that follow run at the same time (they took 40-50 s one after another): the second
    # run and a session share this cache and its archive, which they only read; each damaged
    # archive is a copy in a cache of its own, so that each session finds only its own.
    whole = archive.read_bytes()
    cut_name = jvmcache.named(archive.name.rsplit("-", 1)[0], len(whole) // 3).rsplit("/", 1)[-1]
    flipped = bytearray(whole)  # whole, but not what was written
    flipped[len(whole) // 2:len(whole) // 2 + 64] = b"\x55" * 64
    damaged = {  # cut short, as a full disk would: a JVM would die mapping it; whole size, flipped
        # bytes: the JVM's own check (VerifySharedSpaces) refuses it; cut short and named for its
        # new size, as nothing kinspect writes is: the JVM dies mapping it, and the session
        # starts a JVM again without it and removes it
        "truncated": (archive.name, whole[:len(whole) // 3]), "flipped": (archive.name, bytes(flipped)),
        "renamed": (cut_name, whole[:len(whole) // 3])}
    envs, planted = {}, {}
    for case, (name, data) in damaged.items():
        cache = tmp_path / case / "cache"
        (cache / "spark-jvm").mkdir(parents=True, mode=0o700)
        os.chmod(cache, 0o700)
        planted[case] = cache / "spark-jvm" / name
        planted[case].write_bytes(data)
        envs[case] = dict(os.environ, KINSPECT_CACHE_DIR=str(cache))
    second_args = [sys.executable, "-m", "kinspect", "spark", str(capture), "--out", str(tmp_path / "b"),
                   "--master", "local[1]"]
    with ThreadPoolExecutor(len(damaged) + 2) as pool:
        second = pool.submit(subprocess.run, second_args, capture_output=True, text=True, env=env, timeout=300)
        sessions = {case: pool.submit(_session_maps, case_env) for case, case_env in [("whole", env), *envs.items()]}
        second = second.result()
        sessions = {case: future.result() for case, future in sessions.items()}

    maps, _ = sessions["whole"]
    assert str(archive) in maps
    assert second.returncode == 0 and "background" not in second.stderr, second.stderr[-3000:]
    assert "Traceback" not in second.stderr
    rows = [ds.dataset(tmp_path / out / "exchanges", format="parquet", partitioning="hive").to_table()
            .sort_by([("request_time", "ascending"), ("correlation_id", "ascending")]) for out in ("a", "b")]
    assert rows[0].equals(rows[1]) and rows[0].num_rows > 0

    maps, stderr = sessions["truncated"]
    directory = planted["truncated"].parent
    assert str(directory) not in maps and not planted["truncated"].exists()  # the JDK's own archive only
    assert "SIGBUS" not in stderr

    _, stderr = sessions["flipped"]
    assert "SIGBUS" not in stderr and "fatal error" not in stderr

    maps, _ = sessions["renamed"]
    assert str(planted["renamed"].parent) not in maps and not planted["renamed"].exists()
    # no JVM but the renamed case's crashed, and its log is in its cache
    assert [p for p in tmp_path.rglob("hs_err*") if not p.is_relative_to(planted["renamed"].parent)] == []
    assert not list(Path.cwd().glob("hs_err*"))


def test_only_the_newest_archives_stay(cache_dir):
    stem = jvmcache.archive_stem({})
    directory = os.path.dirname(stem)
    for age, name in enumerate(["d-1.jsa", "c-1.jsa", "b-1.jsa", "a-1.jsa"]):
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(b"x")
        os.utime(path, ns=(10**18 - age * 10**9,) * 2)  # d newest, a oldest
    jvmcache._keep_newest(directory)
    assert sorted(os.listdir(directory)) == ["b-1.jsa", "c-1.jsa", "d-1.jsa"]
