"""A class-data sharing archive for the local Spark driver's JVM: it starts in 5.5 s instead of 8.3.

At every start, a local session's JVM loads, parses and verifies the same 15,000 classes from
Spark's jars, and that is most of its start-up CPU. Java can map them from an archive instead
(-XX:SharedArchiveFile). Measured on the bench's small capture: a whole `kinspect spark` run
took 8.3 s without the archive and 5.45 s with it.

- **Making it.** A local run of the CLI (``create``) that finds no archive has its JVM list the
  classes it loads (-XX:DumpLoadedClassList), which costs nothing measurable. After the session, a
  detached process (``python -m kinspect.spark.jvmcache``) runs ``java -Xshare:dump`` over that
  list with the JVM's own class path and options. It takes about 30 s of CPU, at idle priority
  (SCHED_IDLE), so it never slows what the user runs next, and it does not keep the run waiting.

  Java 17's other way, an archive written as the JVM exits (-XX:ArchiveClassesAtExit), made that
  first run 15 s slower in the foreground.
- **Naming it.** There is one archive per Java and Spark, named by a hash of the java executable,
  the jars (names, sizes, times) and the settings that add jars.
- **Never half-read.** A truncated archive kills the JVM at start (SIGBUS). So the archive is
  written under a temporary name, and renamed when ``java -Xshare:dump`` succeeds to a name that
  carries its size, checked before each use (``named``). The JVM checks its contents
  (-XX:+VerifySharedSpaces: no cost measured) and starts without a damaged one. Temporaries of
  processes that are gone are removed.
- **When it does not fit.** The JVM refuses an archive whose class path changed, and starts as it
  would without one. If a JVM still fails to start with the archive, job.session starts it again
  without it and removes the archive.
- **Where.** The archive (about 170 MB) sits in kinspect's cache (kinspect/cache.py); the newest
  three are kept. An empty KINSPECT_CACHE_DIR turns it off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from kinspect import cache

# the JVM's notes about the archive (classes it skips, a refused archive) are not the user's
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
EXIT_WAIT = 30.0  # seconds a first run waits for its JVM to exit, so that its class list is whole
MAIN_CLASS = "org.apache.spark.deploy.SparkSubmit"
CLASSES, TEMPORARY, DUMPING = ".classes", ".tmp", ".dumping"
KEEP = 3  # archives kept (a new Java or pyspark, or other jars, makes another)


@dataclass
class Archive:
    path: str  # the archive mapped; or, with classes, the stem of the one to make (archive_stem)
    classes: str | None = None  # the class list this run's JVM writes

    @property
    def mapped(self) -> bool:
        return self.classes is None


def java_executable() -> str | None:
    """The java pyspark starts: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def archive_stem(settings: dict, flags: tuple = ()) -> str | None:
    """The archive's name for this Java, these jars and these settings, without its size (see
    named); None without a safe cache directory or a java."""
    root, java = cache.root(), java_executable()
    if root is None or java is None:
        return None
    directory = os.path.join(root, "spark-jvm")
    if not cache.safe_dir(directory):
        return None
    import pyspark

    digest = hashlib.sha256()
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    for path in (os.path.realpath(java), *(os.path.join(jars, name) for name in sorted(_listing(jars)))):
        try:
            st = os.stat(path)
        except OSError:
            continue
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    for key in sorted(settings):
        if "jars" in key or "ClassPath" in key or "packages" in key:
            digest.update(f"{key}={settings[key]}\n".encode())
    digest.update(" ".join(flags).encode())
    return os.path.join(directory, digest.hexdigest()[:32])


def named(stem: str, size: int) -> str:
    """An archive's file name carries its size: a file cut short (a full disk, a copy stopped
    midway) is seen before a JVM maps it, which would kill the JVM with SIGBUS."""
    return f"{stem}-{size}.jsa"


def _find(stem: str) -> str | None:
    """The whole archive of ``stem``; others of its name are removed."""
    directory, prefix = os.path.split(stem)
    found = None
    for name in _listing(directory):
        if not (name.startswith(prefix + "-") and name.endswith(".jsa")):
            continue
        path = os.path.join(directory, name)
        st = cache.own_file(path)
        if st is not None and str(st.st_size) == name[len(prefix) + 1:-len(".jsa")] and found is None:
            found = path
        else:
            _unlink(path)
    return found


def _listing(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def flags(settings: dict, base_flags: tuple = (), create: bool = False) -> tuple[list[str], Archive | None]:
    """The JVM flags that map the archive, or with ``create`` that list the classes to make one
    from when there is none; and the Archive (None: no archive either way)."""
    stem = archive_stem(settings, base_flags)
    if stem is None:
        return [], None
    _remove_stale(os.path.dirname(stem))
    path = _find(stem)
    if path is not None:
        error_file = os.path.join(os.path.dirname(stem), "hs_err_pid%p.log")
        return [f"-XX:SharedArchiveFile={path}", "-XX:+VerifySharedSpaces", f"-XX:ErrorFile={error_file}",
                *QUIET], Archive(path)
    if not create or _holder(stem + DUMPING) is not None:
        return [], None
    classes = f"{stem}.{os.getpid()}{CLASSES}"
    return [f"-XX:DumpLoadedClassList={classes}"], Archive(stem, classes)


def _remove_stale(directory: str) -> None:
    """Class lists and temporaries of processes that are gone."""
    for name in _listing(directory):
        for suffix in (CLASSES, TEMPORARY, DUMPING):
            if name.endswith(suffix):
                path = os.path.join(directory, name)
                pid = _holder(path) if suffix == DUMPING else _pid_in(name[:-len(suffix)])
                if pid is None or pid != os.getpid() and not _alive(pid):
                    _unlink(path)


def _pid_in(stem: str) -> int | None:
    try:
        return int(stem.rsplit(".", 1)[1])
    except (IndexError, ValueError):
        return None


def _holder(lock: str) -> int | None:
    """The live process that holds a lock file, or None."""
    try:
        with open(lock) as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return None
    return pid if pid > 0 and _alive(pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def finish(archive: Archive | None, say=None) -> None:
    """After the session stopped, on a run that listed its classes: end its JVM, and once it has
    exited, start the detached dump. ``say(text)`` tells the user."""
    if archive is None or archive.mapped:
        return
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    command = _command(proc.pid) if proc is not None else None
    if proc is None or command is None:
        _unlink(archive.classes)
        return
    try:
        gateway.shutdown()
    except Exception:  # py4j's own errors: the JVM may be gone already
        pass
    if proc.stdin is not None:
        proc.stdin.close()  # the gateway JVM exits when its stdin ends
    try:
        code = proc.wait(EXIT_WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = None
    SparkContext._gateway = SparkContext._jvm = None  # a later session starts a new JVM
    if code != 0 or cache.own_file(archive.classes) is None:
        _unlink(archive.classes)
        return
    subprocess.Popen([sys.executable, "-P", "-m", "kinspect.spark.jvmcache", archive.path, archive.classes, *command],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    if say is not None:
        say("the Spark JVM's classes are being saved in the background, on idle CPU only: "
            "later runs will start about 3 s sooner")


def abandon(archive: Archive | None) -> None:
    """A run that was interrupted makes no archive: its class list goes (the JVM, still writing
    it, holds it open)."""
    if archive is not None and not archive.mapped:
        _unlink(archive.classes)


def _command(pid: int) -> list[str] | None:
    """The JVM's java and options (those before its main class), from /proc; None elsewhere."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
    except (OSError, UnicodeDecodeError):
        return None
    if MAIN_CLASS not in argv:
        return None
    return [a for a in argv[:argv.index(MAIN_CLASS)] if not a.startswith("-XX:DumpLoadedClassList=")]


def dump(stem: str, classes: str, command: list[str]) -> int:
    """``java -Xshare:dump`` of the classes listed, with the JVM's own class path and options,
    into the archive of ``stem`` (whole or not at all); at idle priority, one dump per archive
    at a time."""
    lock = stem + DUMPING
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        _unlink(classes)
        return 1
    temporary = f"{stem}.{os.getpid()}{TEMPORARY}"
    try:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        mine = f"{stem}.{os.getpid()}{CLASSES}"  # the run that listed them is gone: named after this one
        os.replace(classes, mine)
        classes = mine
        if hasattr(os, "SCHED_IDLE"):
            try:
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            except OSError:
                os.nice(19)
        java, options = command[0], command[1:]
        done = subprocess.run([java, "-Xshare:dump", f"-XX:SharedClassListFile={classes}",
                               f"-XX:SharedArchiveFile={temporary}", *options, *QUIET],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        st = cache.own_file(temporary)
        if done.returncode == 0 and st is not None and st.st_size > 0:
            os.replace(temporary, named(stem, st.st_size))
            _keep_newest(os.path.dirname(stem))
            return 0
        return 1
    finally:
        for leftover in (temporary, classes, lock):
            _unlink(leftover)


def _keep_newest(directory: str, keep: int = KEEP) -> None:
    """Archives of an older Java or Spark are never mapped again: only the newest few stay."""
    archives = []
    for name in _listing(directory):
        st = cache.own_file(os.path.join(directory, name)) if name.endswith(".jsa") else None
        if st is not None:
            archives.append((st.st_mtime_ns, name))
    for _, name in sorted(archives, reverse=True)[keep:]:
        _unlink(os.path.join(directory, name))


def discard(archive: Archive | None) -> None:
    """An archive the JVM could not start with."""
    if archive is not None:
        _unlink(archive.path)


if __name__ == "__main__":
    sys.exit(dump(sys.argv[1], sys.argv[2], sys.argv[3:]))
