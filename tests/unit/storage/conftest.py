"""Material for the storage tests: broker-written log dirs (tests/data/unlicensed, samples/) and helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinspect.storage import files
from kinspect.storage.dump import DumpOptions, dump_file
from tests.conftest import KAFKAFUN, SAMPLES, SOC_STREAMING

SOC = SOC_STREAMING / "auth_events-0"
KAFKA4 = SAMPLES / "kafka-4.1.2" / "logs"
LEGACY = SAMPLES / "kafka-3.9.2-legacy" / "logs"
SEGMENT = "00000000000000000000.log"


def need(path: Path) -> Path:
    """A samples/ path; the test is skipped while samples/ is not there."""
    if not path.exists():
        pytest.fail(f"{path} is missing: samples/ is committed (tools/make_samples.py regenerates it)")
    return path


def events(path: Path, **options) -> list[dict]:
    """Every dump event of one file, read as bytes, its .log companion beside it."""
    def companion(suffix: str):
        other = files.companion(path, suffix)
        return other.read_bytes() if other.is_file() and other != path else None
    return list(dump_file(str(path), path.read_bytes(), files.describe(path),
                          DumpOptions(**options), companion))


def of_type(all_events: list[dict], kind: str) -> list[dict]:
    return [e for e in all_events if e["type"] == kind]


def problems_of(all_events: list[dict], severities=("error", "warning")) -> list[dict]:
    found = [p for e in all_events for p in e.get("problems") or () if isinstance(p, dict)]
    found += [e for e in all_events if e["type"] == "notice"]
    return [p for p in found if p["severity"] in severities]
