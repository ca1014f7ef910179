"""What a check says: a finding, a plain dict ready for JSON Lines.

    {"type": "finding", "check": "lag", "severity": "warning", "summary": "...",
     ...subject fields..., "evidence": [{"conn", "correlation_id", "time"}, ...]}

``time`` in evidence is the request's capture time in seconds since the epoch (decode's
``request_time``), so ``kinspect decode --conn CONN --correlation-id N`` finds the exchange.
"""

from __future__ import annotations

import datetime as _dt

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)  # most severe first
RANK = {ERROR: 2, WARNING: 1, INFO: 0}
EVIDENCE = 5  # exchanges named per finding


def finding(check: str, severity: str, summary: str, evidence=(), **subject) -> dict:
    return {"type": "finding", "check": check, "severity": severity, "summary": summary,
            **subject, "evidence": list(evidence)[:EVIDENCE]}


def evidence(record: dict) -> dict:
    """The exchange to look at with decode: its connection, correlation id and time (and the
    capture it is in, when the run read more than one)."""
    found = {"conn": record.get("conn"), "correlation_id": record.get("correlation_id"),
             "time": record.get("request_time")}
    capture = record.get("capture")
    if capture is not None:
        found["capture"] = capture
    return found


def when(record: dict) -> float:
    """The moment an exchange finished (its response), or was sent when unanswered."""
    return record.get("response_time") or record.get("request_time") or 0.0


def iso(seconds: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC with milliseconds; None stays None."""
    if seconds is None:
        return None
    try:
        moment = _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def worst_first(findings: list[dict]) -> list[dict]:
    """Most severe first, then by check and summary (stable, for reproducible output)."""
    return sorted(findings, key=lambda f: (-RANK[f["severity"]], f["check"], str(f["summary"])))
