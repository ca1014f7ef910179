"""Files and bytes done while the decode job runs: Spark's task counts mapped onto the plan.

Spark says how many of the decode stage's tasks have completed and how many run (the
SparkContext's status tracker, polled; or Spark Connect's progress handler), not which.
Task i decodes unit i, tasks launch in index order, and the units go largest first, so among
the launched tasks the later, smaller ones finish first: the completed tasks are taken to be
the smallest of those launched. The figure is exact when every unit is the same size and
when the job has finished; in between it is an estimate that does not run ahead of the
smallest units; what is shown never goes back.

The bar is drawn with rich on stderr, only when stderr is a terminal.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from kinspect.spark.connect import is_connect
from kinspect.spark.plan import Unit

POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Done:
    tasks: int
    files: int
    bytes: int


def totals(units: list[Unit]) -> Done:
    sizes = {f.path: f.size for u in units for f in u.files}
    return Done(len(units), len(sizes), sum(sizes.values()))


def done(units: list[Unit], completed: int, active: int = 0) -> Done:
    """Tasks, files and bytes done when ``completed`` of the units' tasks have completed and
    ``active`` are running (see the module's docstring). A file is done when every unit holding
    it is (a split file: all its shards)."""
    n = len(units)
    completed = max(0, min(completed, n))
    if completed == n:
        return totals(units)
    launched = min(n, completed + max(0, active))
    finished = sorted(range(launched), key=lambda i: (units[i].weight, -i))[:completed]
    parts = Counter(f.path for u in units for f in u.files)
    finished_parts = Counter(f.path for i in finished for f in units[i].files)
    size = {f.path: f.size for u in units for f in u.files}
    whole = [path for path, count in finished_parts.items() if count == parts[path]]
    shards_bytes = sum(sum(f.size for f in units[i].files) / units[i].shards for i in finished)
    return Done(completed, len(whole), min(int(shards_bytes), sum(size.values())))


def tracker_figures(sc, group: str, tasks: int) -> tuple[int, int] | None:
    """(completed, active) tasks of the job group's stage of ``tasks`` tasks, from the
    SparkContext's status tracker; None before Spark knows the stage."""
    tracker = sc.statusTracker()
    best = None
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in (job.stageIds if job else ()):
            stage = tracker.getStageInfo(stage_id)
            if stage is not None and stage.numTasks == tasks:
                figures = (stage.numCompletedTasks, stage.numActiveTasks)
                best = figures if best is None else max(best, figures)
    return best


def connect_figures(stages, inflight: int, tasks: int) -> tuple[int, int] | None:
    """(completed, active) from a Spark Connect progress report: its stage of ``tasks`` tasks."""
    best = None
    for stage in stages:
        if stage.num_tasks == tasks:
            figures = (stage.num_completed_tasks, 0 if stage.done else inflight)
            best = figures if best is None else max(best, figures)
    return best


@contextmanager
def watch(spark, units: list[Unit], show: Callable[[Done], None]) -> Iterator[None]:
    """Report Done to ``show`` while the block runs the decode job (its first action), and once
    more at the end from Spark's final figures."""
    n = len(units)
    last: list = [None]

    shown = [Done(0, 0, 0)]

    def report(figures) -> None:
        if figures is None or figures == last[0]:
            return
        last[0] = figures
        now, before = done(units, *figures), shown[0]
        # more tasks launched can make the estimate smaller: the bar never goes back
        now = Done(max(now.tasks, before.tasks), max(now.files, before.files), max(now.bytes, before.bytes))
        if now != before:
            shown[0] = now
            show(now)

    if is_connect(spark):
        def handler(stages=(), inflight_tasks=0, operation_id=None, done=False, **_):
            report(connect_figures(stages or (), inflight_tasks, n))
        spark.registerProgressHandler(handler)
        try:
            yield
        finally:
            spark.removeProgressHandler(handler)
        return
    sc = spark.sparkContext
    group = f"kinspect-decode-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "kinspect spark: decode")
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(POLL_SECONDS):
            report(tracker_figures(sc, group, n))

    thread = threading.Thread(target=poll, name="kinspect-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
    report(tracker_figures(sc, group, n))


class Bar:
    """A rich progress bar on stderr: bytes done of the total, and files done."""

    def __init__(self, units: list[Unit]):
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
        self.total = totals(units)
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=True)
        self.task = self.progress.add_task(self._label(Done(0, 0, 0)), total=self.total.bytes)

    def _label(self, now: Done) -> str:
        return f"decoding: {now.files}/{self.total.files} files"

    def __call__(self, now: Done) -> None:
        self.progress.update(self.task, completed=now.bytes, description=self._label(now))

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()
