"""Run one child process and measure it: wall time, its own CPU time and peak RSS (os.wait4 gives
the rusage of exactly that child), plus the facts of the machine the numbers came from."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
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
    exit_code: int

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    def to_dict(self) -> dict:
        return {**asdict(self), "cpu_s": round(self.cpu_s, 3)}


def run_child(argv: list[str], stdout=subprocess.DEVNULL, cwd: Path = REPO) -> ChildRun:
    """Run argv with stdout to /dev/null (or the given file), stderr discarded. With cwd a
    snapshot (see snapshot_kinspect), `python -m kinspect` runs the snapshot's code."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            cwd=cwd, env=child_env())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ChildRun(round(wall, 3), round(usage.ru_utime, 3), round(usage.ru_stime, 3),
                    round(usage.ru_maxrss / 1024, 1), proc.returncode)


def child_env() -> dict:
    """The repository on the path after the working directory: tests.bench imports from it,
    kinspect from the snapshot when the child runs in one."""
    return {**os.environ, "PYTHONPATH": str(REPO)}


def snapshot_kinspect(into: Path, ref: str = "HEAD") -> dict:
    """Copy the kinspect package into `into`: at a git ref (default HEAD: committed code, named
    by its commit), or as the working tree has it now (ref "worktree"). Others keep editing the
    tree, and one benchmark must measure one version of the code. Returns what was copied."""
    shutil.rmtree(into / "kinspect", ignore_errors=True)
    into.mkdir(parents=True, exist_ok=True)
    if ref == "worktree":
        shutil.copytree(REPO / "kinspect", into / "kinspect", ignore=shutil.ignore_patterns("__pycache__"))
    else:
        archive = subprocess.run(["git", "archive", ref, "kinspect"], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    digest = hashlib.sha256()
    for path in sorted((into / "kinspect").rglob("*.py")):
        digest.update(path.relative_to(into).as_posix().encode() + b"\0" + path.read_bytes())
    facts = {"ref": ref, "commit": _git("rev-parse", "HEAD" if ref == "worktree" else ref),
             "sha256": digest.hexdigest()[:16]}
    facts["commit_date"] = _git("log", "-1", "--format=%cI", facts["commit"])
    if ref == "worktree":
        changed = _git("status", "--porcelain", "kinspect").splitlines()
        facts["uncommitted"] = sorted(line.split(None, 1)[1] for line in changed)
    return facts


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


def machine_facts() -> dict:
    return {"nproc": os.cpu_count(), "cpu_model": _cpu_model(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "kernel": platform.release(), "python": sys.version.split()[0],
            "tshark": _first_line(["tshark", "--version"]),
            "load_average": os.getloadavg()}
