"""The schema fixtures (recorded by tests/lab/schema_fixture.py) and their manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CAPTURE = ROOT / "tests" / "data" / "schemas" / "schemas-confluent.pcap"
MANIFEST = ROOT / "tests" / "data" / "schemas" / "schemas-confluent.manifest.json"
LOGS = ROOT / "samples" / "schemas" / "logs"
DATA_TOPICS = ("lab-avro", "lab-proto", "lab-json", "lab-headers", "lab-retired", "lab-plain")


def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def expected() -> dict[tuple[str, int], dict]:
    """What each client serialized, by (topic, offset)."""
    return {(r["topic"], r["offset"]): r for r in manifest()["records"]}


def kinspect(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def dumped_records(lines: list[dict]) -> dict[tuple[str, int], dict]:
    out = {}
    for line in lines:
        if line.get("type") == "batch" and line.get("topic") in DATA_TOPICS:
            for record in line.get("records") or ():
                out[(line["topic"], record["offset"])] = record
    return out
