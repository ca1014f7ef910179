"""Run one child process and measure it: wall time, its own CPU time and peak RSS (os.wait4 gives
the rusage of exactly that child), plus the facts of the machine the numbers came from."""

from __future__ import annotations

import os
import platform
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


def run_child(argv: list[str], stdout=subprocess.DEVNULL) -> ChildRun:
    """Run argv with stdout to /dev/null (or the given file), stderr discarded."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ChildRun(round(wall, 3), round(usage.ru_utime, 3), round(usage.ru_stime, 3),
                    round(usage.ru_maxrss / 1024, 1), proc.returncode)


def _first_line(argv: list[str]) -> str:
    out = subprocess.run(argv, capture_output=True, text=True)
    return (out.stdout or out.stderr).splitlines()[0].strip()


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _git_commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "kinspect"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + ("+uncommitted kinspect/ changes" if dirty else "")


def machine_facts() -> dict:
    return {"nproc": os.cpu_count(), "cpu_model": _cpu_model(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "kernel": platform.release(), "python": sys.version.split()[0],
            "tshark": _first_line(["tshark", "--version"]), "kinspect_commit": _git_commit(),
            "load_average": os.getloadavg()}
