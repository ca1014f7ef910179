"""Run one child process and measure it: wall time, its own CPU time and peak RSS (os.wait4 gives
the rusage of exactly that child), plus the facts of the machine the numbers came from."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ChildRun:
    wall_s: float
    user_s: float
    sys_s: float
    peak_rss_mb: float
    peak_tree_pss_mb: float
    exit_code: int
    others_cpu_s: float = 0.0  # CPU time the rest of the machine used meanwhile (/proc/stat)

    @property
    def others_cores(self) -> float:
        """How many CPUs other processes kept busy on average while this child ran."""
        return self.others_cpu_s / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    def to_dict(self) -> dict:
        return {**asdict(self), "cpu_s": round(self.cpu_s, 3), "others_cores": round(self.others_cores, 2)}


def run_child(argv: list[str], stdout=subprocess.DEVNULL, cwd: Path = REPO, env: dict | None = None) -> ChildRun:
    """Run argv with stdout to /dev/null (or the given file), stderr discarded. With cwd a
    snapshot (see snapshot_kinspect), `python -m kinspect` runs the snapshot's code.

    peak_rss_mb is the kernel's high-water mark of the largest single process (wait4 counts the
    child's reaped workers' CPU time, but its maxrss is one process's); peak_tree_pss_mb is the
    sampled peak of the child and all its descendants together (proportional set size, so pages
    that forked workers share are counted once), which is what a multi-process run costs.
    others_cpu_s is the machine's busy CPU time over the run less the child's own: on a shared
    machine, the load the child competed with."""
    busy_before, own_before = _machine_busy_s(), _own_cpu_s()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            cwd=cwd, env=child_env(env))
    sampler = _TreeMemory(proc.pid)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    sampler.stop()
    others = (_machine_busy_s() - busy_before - usage.ru_utime - usage.ru_stime  # less this process's
              - (_own_cpu_s() - own_before))                                     # sampling, too
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ChildRun(round(wall, 3), round(usage.ru_utime, 3), round(usage.ru_stime, 3),
                    round(usage.ru_maxrss / 1024, 1), round(sampler.peak_kb / 1024, 1), proc.returncode,
                    round(max(0.0, others), 2))


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _machine_busy_s() -> float:
    """CPU seconds all CPUs have spent not idle since boot (/proc/stat: all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(f) for f in fields]
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


class _TreeMemory(threading.Thread):
    """Samples the summed PSS of a process and its descendants every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.1):
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak_kb = pid, interval, 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.peak_kb = max(self.peak_kb, sum(_pss_kb(p) for p in _tree(self.pid)))
            self._done.wait(self.interval)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _tree(root: int) -> list[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parents.items() if ppid in frontier]
        tree += frontier
    return tree


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def child_env(extra: dict | None = None) -> dict:
    """The repository on the path after the working directory: tests.bench imports from it,
    kinspect from the snapshot when the child runs in one; and ``extra`` variables."""
    return {**os.environ, "PYTHONPATH": str(REPO), **(extra or {})}


def snapshot_kinspect(into: Path, ref: str = "HEAD") -> dict:
    """Copy the kinspect package into `into` and build its C accelerators there: at a git ref
    (default HEAD: committed code, named by its commit), or as the working tree has it now (ref
    "worktree"). Others keep editing the tree, and one benchmark must measure one version of the
    code. Returns what was copied and which accelerators the snapshot runs with."""
    shutil.rmtree(into / "kinspect", ignore_errors=True)
    into.mkdir(parents=True, exist_ok=True)
    if ref == "worktree":
        shutil.copytree(REPO / "kinspect", into / "kinspect",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        shutil.copy2(REPO / "setup.py", into / "setup.py")
    else:
        has_setup = subprocess.run(["git", "cat-file", "-e", f"{ref}:setup.py"], cwd=REPO,
                                   capture_output=True).returncode == 0  # older refs have none
        archive = subprocess.run(["git", "archive", ref, "kinspect", *(["setup.py"] if has_setup else [])],
                                 cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    digest = hashlib.sha256()
    for path in sorted(p for p in (into / "kinspect").rglob("*") if p.suffix in (".py", ".c")):
        digest.update(path.relative_to(into).as_posix().encode() + b"\0" + path.read_bytes())
    facts = {"ref": ref, "commit": _git("rev-parse", "HEAD" if ref == "worktree" else ref),
             "sha256": digest.hexdigest()[:16]}
    facts["commit_date"] = _git("log", "-1", "--format=%cI", facts["commit"])
    if ref == "worktree":
        changed = _git("status", "--porcelain", "kinspect").splitlines()
        facts["uncommitted"] = sorted(line.split(None, 1)[1] for line in changed)
    facts["native"] = _build_native(into)
    return facts


def _build_native(into: Path) -> dict:
    """Build the snapshot's C accelerators in place (if it has any) and compile its bytecode, as
    pip does when it installs a package (this machine sets PYTHONDONTWRITEBYTECODE, which would
    otherwise make every run compile all its modules from source); which accelerators load."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "kinspect")], capture_output=True)
    if (into / "setup.py").exists():
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=into,
                       capture_output=True, env=child_env())
    probe = ("import json, kinspect.native as n; print(json.dumps(n.status()))"
             if (into / "kinspect" / "native").is_dir() else "print('{}')")
    found = subprocess.run([sys.executable, "-c", probe], cwd=into, capture_output=True, text=True,
                           env=child_env())
    return json.loads(found.stdout or "{}")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()


def _first_line(argv: list[str]) -> str:
    out = subprocess.run(argv, capture_output=True, text=True)
    return (out.stdout or out.stderr).splitlines()[0].strip()


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def code_facts() -> dict:
    """The commit the repository's working tree is at, and kinspect's files changed since: every
    figure is recorded with the code it measured (a snapshot's own facts take precedence)."""
    changed = _git("status", "--porcelain", "kinspect").splitlines()
    return {"commit": _git("rev-parse", "HEAD"), "uncommitted": sorted(line.split(None, 1)[1] for line in changed)}


def machine_facts() -> dict:
    return {**code_facts(), "nproc": os.cpu_count(), "cpu_model": _cpu_model(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "kernel": platform.release(), "python": sys.version.split()[0],
            "tshark": _first_line(["tshark", "--version"]),
            "load_average": os.getloadavg()}
