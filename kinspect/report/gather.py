"""Everything a report shows, gathered in one pass over the captures' finished exchanges (and a
log dir): the doctor's checks, the client inventory, decode --summary's counts and the report's
timeline. Each reads every record; nothing here computes what they already do.

    gathered = Gathered(thresholds)
    for record in capture_records(run):
        gathered.add(record)
    gathered.log_dir(path)                   # optional
    gathered.finish()
"""

from __future__ import annotations

from pathlib import Path

from kinspect.doctor.clients import Inventory
from kinspect.doctor.options import DEFAULTS, Thresholds
from kinspect.doctor.run import Doctor
from kinspect.limits import Limits
from kinspect.report.logdir import LogDir, read_log_dir
from kinspect.report.timeline import Timeline
from kinspect.decode.summary import Summary


class Gathered:
    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.thresholds = thresholds
        self.doctor = Doctor(thresholds)
        self.inventory = Inventory(thresholds)
        self.summary = Summary()
        self.timeline = Timeline()
        self.storage: LogDir | None = None
        self.findings: list[dict] = []
        self.notices: list[dict] = []
        self.log_dir_problems: list[str] = []
        self.lag_rows: list[dict] = []

    def add(self, record: dict) -> None:
        self.summary.add(record)
        if record.get("type") != "exchange":
            return
        self.doctor.exchange(record)
        self.inventory.exchange(record)
        self.timeline.add(record)

    def log_dir(self, path: Path, limits: Limits | None = None) -> None:
        """The log dir's storage facts, validate's findings and doctor's transaction findings.
        Raises report.logdir.LogDirUnreadable (doctor's own error is turned into it)."""
        from kinspect.doctor.logdir import LogDirUnreadable as DoctorUnreadable
        from kinspect.doctor.logdir import read_transactions

        self.storage = read_log_dir(path, limits)
        try:
            found, notices, problems = read_transactions(path, self.thresholds, limits)
        except DoctorUnreadable as e:  # a log dir of internal topics only, say
            self.log_dir_problems.append(str(e))
            return
        self.findings += found
        self.notices += notices
        self.log_dir_problems += [f"{p.severity}: {p}" for p in problems]

    def finish(self) -> None:
        lag = self.doctor.check("lag")
        self.lag_rows = lag.rows() if lag is not None else []
        self.findings, notices = self.doctor.finish(self.findings)
        self.notices += notices + self.inventory.notices()
