"""The doctor: every check fed the finished exchanges of the captures, then asked for findings.

    doctor = Doctor(Thresholds())
    for record in capture_records(run):      # or any iterable of decode's dicts
        doctor.exchange(record)
    findings, notices = doctor.finish()

Each exchange goes only to the checks that read its API (a table by API key). ``finish`` takes
the capture's end (the last moment any exchange shows) as "now"."""

from __future__ import annotations

from kinspect.doctor.errors import Errors
from kinspect.doctor.finding import worst_first
from kinspect.doctor.hanging import Hanging
from kinspect.doctor.lag import Lag
from kinspect.doctor.options import DEFAULTS, Thresholds
from kinspect.doctor.producer_sequence import ProducerSequence
from kinspect.doctor.rebalance import Rebalance
from kinspect.doctor.removed_versions import RemovedVersions
from kinspect.doctor.schemas import Schemas
from kinspect.doctor.slow import Slow
from kinspect.doctor.throttle import Throttle

CHECKS = {check.name: check for check in (Rebalance, Lag, RemovedVersions, Hanging, ProducerSequence,
                                          Throttle, Errors, Slow, Schemas)}


class Doctor:
    def __init__(self, thresholds: Thresholds = DEFAULTS, only: tuple[str, ...] = ()):
        self.checks = [check(thresholds) for name, check in CHECKS.items() if not only or name in only]
        self._every = [c.exchange for c in self.checks if c.apis is None]
        self._by_api: dict[int, list] = {}
        for check in self.checks:
            for key in check.apis or ():
                self._by_api.setdefault(key, []).append(check.exchange)
        self.end = 0.0
        self.exchanges = 0

    def check(self, name: str):
        return next((c for c in self.checks if c.name == name), None)

    def exchange(self, record: dict) -> None:
        if record.get("type") != "exchange":
            return
        self.exchanges += 1
        moment = record.get("response_time") or record.get("request_time") or 0.0
        if moment > self.end:
            self.end = moment
        for handle in self._every:
            handle(record)
        for handle in self._by_api.get(record["api_key"], ()):
            handle(record)

    def finish(self, extra: list[dict] = ()) -> tuple[list[dict], list[dict]]:
        """(findings, most severe first; notices of state dropped at a bound)."""
        findings = list(extra)
        notices = []
        for check in self.checks:
            findings += check.finish(self.end)
            for bounded in check.bounded:
                notice = bounded.notice(check.name)
                if notice is not None:
                    notices.append(notice)
        return worst_first(findings), notices
