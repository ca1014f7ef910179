"""One pass gathers what doctor, clients and decode --summary say, on the doctor scenario."""

import json
import subprocess
import sys

from kinspect.decode.pipeline import DecodeRun
from kinspect.doctor.source import capture_records
from kinspect.report.gather import Gathered
from kinspect.report.model import build
from tests.conftest import REPO

SCENARIO = REPO / "tests" / "data" / "doctor-scenario"


def _cli(*args):
    done = subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_report_holds_doctors_findings_clients_rows_and_the_summary():
    port = json.loads((SCENARIO / "manifest.json").read_text())["port"]
    capture = SCENARIO / "doctor-scenario.pcap"
    gathered = Gathered()
    for record in capture_records(DecodeRun(str(capture), ports={port, 9092})):
        gathered.add(record)
    gathered.log_dir(SCENARIO / "logs")
    gathered.finish()
    doctor = _cli("doctor", "--json", "--port", port, capture, "--log-dir", SCENARIO / "logs")
    assert [f["summary"] for f in gathered.findings] == [f["summary"] for f in doctor if f["type"] == "finding"]
    clients = _cli("clients", "--json", "--all", "--port", port, capture)
    assert sorted(r["client_id"] for r in gathered.inventory.rows()) == sorted(r["client_id"] for r in clients)
    summary = _cli("decode", "--summary", "--json", "--port", port, capture)
    assert [r for r in gathered.summary.rows()] == [r for r in summary if r["type"] == "summary"]
    model = build(gathered, [str(capture)], str(SCENARIO / "logs"))
    charts = {c["id"]: c for s in model["sections"] for c in s["charts"]}
    lag = {s["name"]: len(s["points"]) for s in charts["lag"]["series"]}
    series = [r for r in _cli("doctor", "--json", "--series", "--check", "lag", "--port", port, capture)
              if r["type"] == "lag_series"]
    assert lag == {f"{r['group']} {r['topic']}-{r['partition']}": len(r["series"]) for r in series}
    assert [s["name"] for s in charts["rebalance"]["series"]] == ["rebalance-app"]
