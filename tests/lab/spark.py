"""Spark for the `kinspect spark` lab tests: a standalone master and worker, a Spark Connect
server, all from the pip-installed pyspark on 127.0.0.1, and the packed environment built once.

Every process starts with PYTHONPATH removed, so that whatever runs kinspect on the executors
comes from the packed environment (or, for the Connect server, from what the test gives it).

Spark's scratch space (scratch_dir) is on /dev/shm when it has room: each run unpacks the packed
environment (470 MB, 14,500 files) for its driver and again for each executor, and Spark deletes
them when the run and the daemons stop. On the disk those deletions took 4 s each on a quiet
machine and up to 35 s on a busy one (an ext4 mounted with discard), inside SparkContext.stop
and the daemons' shutdown; on tmpfs, under half a second.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyspark

from tests.lab.tansu import free_port

REPO = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = str(SPARK_HOME / "bin" / "spark-class")
SPARK_SUBMIT = str(SPARK_HOME / "bin" / "spark-submit")
ENV_CACHE = Path.home() / ".cache" / "kinspect-spark-env"
SHM = Path("/dev/shm")
SHM_NEEDED = 4 << 30  # three unpacked environments and their archives, with room to spare


def scratch_dir(prefix: str) -> Path:
    """A new directory for Spark's scratch space, on /dev/shm when it has SHM_NEEDED free (else
    the temporary directory); the caller removes it. Those a killed test run left in /dev/shm
    (they hold memory) are removed first."""
    _remove_orphans()
    try:
        shm = SHM.is_dir() and shutil.disk_usage(SHM).free >= SHM_NEEDED
    except OSError:
        shm = False
    return Path(tempfile.mkdtemp(prefix=f"kinspect-{prefix}-{os.getpid()}-", dir=SHM if shm else None))


def _remove_orphans() -> None:
    """scratch_dir's directories in /dev/shm whose process is gone (kinspect-PREFIX-PID-RANDOM)."""
    for path in SHM.glob("kinspect-*-*-*"):
        pid = path.name.rsplit("-", 2)[1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def clean_env(scratch: Path, **extra: str) -> dict[str, str]:
    """This process's environment without PYTHONPATH or kinspect's switches, on 127.0.0.1, with
    Spark's scratch space (SPARK_LOCAL_DIRS: shipped archives, unpacked environments, shuffle and
    cache files) under ``scratch``, for the test to remove: each copy of the packed environment
    takes 130 MB, and each unpacking 400 MB."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "KINSPECT_PURE_PYTHON")
           and not k.startswith("PYSPARK_GATEWAY")}
    scratch.mkdir(parents=True, exist_ok=True)
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_DIRS=str(scratch),
               _JAVA_OPTIONS=f"-Djava.io.tmpdir={scratch}", **extra)
    return env


def _wait_for(log: Path, mark: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and mark in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise RuntimeError(f"no {mark!r} within {timeout:g} s (exit {process.poll()}):\n{tail}")


class _Daemons:
    """Daemons logging into ``workdir``; their scratch space and work directories in a
    scratch_dir of their own, removed by stop()."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.space = scratch_dir(workdir.name)
        self.scratch = self.space / "scratch"
        self.processes: list[subprocess.Popen] = []

    def _start(self, name: str, argv: list[str], mark: str, timeout: float, env: dict | None = None) -> Path:
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env or clean_env(self.scratch),
                                       cwd=self.workdir, start_new_session=True)
        self.processes.append(process)
        _wait_for(log, mark, process, timeout)
        return log

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()
        shutil.rmtree(self.space, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class StandaloneCluster(_Daemons):
    """A standalone master and one worker (``cores`` cores, ``memory``) on 127.0.0.1."""

    def __init__(self, workdir: Path, cores: int = 2, memory: str = "1500m"):
        super().__init__(workdir)
        self.cores, self.memory = cores, memory
        self.url = ""

    def start(self, timeout: float = 60.0) -> "StandaloneCluster":
        port = free_port()
        self.url = f"spark://127.0.0.1:{port}"
        self._start("master", [SPARK_CLASS, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(free_port())],
                    "I have been elected leader", timeout)
        (self.space / "work").mkdir(exist_ok=True)
        self._start("worker", [SPARK_CLASS, "org.apache.spark.deploy.worker.Worker", self.url,
                               "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                               "--work-dir", str(self.space / "work"), "--webui-port", str(free_port())],
                    "Successfully registered with master", timeout)
        return self


class ConnectServer(_Daemons):
    """A Spark Connect server (pyspark's spark-connect jar) on 127.0.0.1, running ``master``."""

    def __init__(self, workdir: Path, master: str = "local[2]"):
        super().__init__(workdir)
        self.master = master
        self.url = ""

    def start(self, timeout: float = 90.0, env: dict | None = None) -> "ConnectServer":
        port = free_port()
        self.url = f"sc://127.0.0.1:{port}"
        self._start("connect", [SPARK_SUBMIT, "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
                                "--master", self.master, "--driver-memory", "1g",
                                "--conf", "spark.ui.enabled=false",
                                "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
                                "--conf", f"spark.connect.grpc.binding.port={port}",
                                "--conf", "spark.connect.grpc.binding.address=127.0.0.1"],
                    "Spark Connect server started", timeout, env)
        return self


def _source_digest() -> str:
    """What the packed environment is made of: kinspect's sources and build files, this Python,
    and the pyarrow and pandas it pins."""
    from importlib import metadata
    digest = hashlib.sha256(sys.version.encode())
    for name in ("pyarrow", "pandas"):
        digest.update(metadata.version(name).encode())
    for path in sorted([*(REPO / "kinspect").rglob("*.py"), *(REPO / "kinspect").rglob("*.c"),
                        REPO / "pyproject.toml", REPO / "setup.py"]):
        digest.update(str(path.relative_to(REPO)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def packed_environment() -> Path:
    """kinspect's packed environment for this tree (package.build, the code behind --package),
    built once per change of the sources and kept in ~/.cache/kinspect-spark-env."""
    from kinspect.spark import package
    path = ENV_CACHE / f"env-{_source_digest()}.tar.gz"
    if not path.exists():
        ENV_CACHE.mkdir(parents=True, exist_ok=True)
        for old in ENV_CACHE.glob("env-*.tar.gz"):  # one environment kept: they are 130 MB each
            old.unlink()
        partial = path.with_suffix(".partial.tar.gz")
        native = package.build(str(partial))
        assert all(native.values()), native
        partial.rename(path)
    return path


def unpacked(archive: Path, into: Path) -> Path:
    """The packed environment unpacked, as a client machine with kinspect installed: its python.
    By tar, which takes two thirds of tarfile's time."""
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(into)], check=True, timeout=300)
    return into / "bin" / "python"
