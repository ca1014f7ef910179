"""Every check over the committed captures (pcaps/): each finding there is real, and asserted."""

import json
from functools import cache

import pytest

from kinspect.doctor import kip896
from kinspect.doctor.finding import INFO, WARNING
from kinspect.doctor.run import CHECKS, Doctor
from kinspect.doctor.source import capture_records
from kinspect.decode.pipeline import DecodeRun
from tests.conftest import PCAPS

CAPTURES = sorted(p for p in PCAPS.iterdir() if p.suffix in (".pcap", ".pcapng"))


@cache
def _findings(name: str):
    doctor = Doctor()
    for record in capture_records(DecodeRun(str(PCAPS / name))):
        doctor.exchange(record)
    findings, notices = doctor.finish()
    return doctor, findings, notices


@pytest.mark.parametrize("capture", [p.name for p in CAPTURES])
def test_every_finding_on_the_committed_captures_is_real(capture):
    doctor, findings, notices = _findings(capture)
    assert doctor.exchanges > 0 and notices == []
    for found in findings:
        assert found["check"] in CHECKS and found["summary"]
        assert all(e["conn"] and e["correlation_id"] is not None for e in found["evidence"])
        if found["check"] == "removed_api_versions":
            # kafka-python pinned to a pre-2.x api_version (the captures' manifests say so)
            assert found["severity"] == WARNING and found["client_id"].startswith("kafka-python")
            assert "-0.8" in found["client_id"] or "-0.9" in found["client_id"] or "-0.10" in found["client_id"]
            for api in found["apis"]:
                assert all(kip896.removed(api["api_key"], v) for v in api["versions"])
        elif found["check"] == "errors" and found["severity"] != INFO:
            # Tansu answers kafka-python's legacy message sets with UNKNOWN_PRODUCER_ID: the
            # clients' manifest records UnknownProducerIdError for these very topics
            assert capture == "kafka-python-legacy-rejected.pcap" and found["error"] == "UNKNOWN_PRODUCER_ID"
            manifest = json.loads((PCAPS / "kafka-python-legacy-rejected.manifest.json").read_text())
            failed = {p["topic"] for c in manifest["clients"] for p in c["produced"]
                      if "UnknownProducerId" in str(p["error"])}
            assert {t["topic"] for t in found["topics"]} == failed
        else:
            # the rest is routine (a coordinator loading, MEMBER_ID_REQUIRED): info only
            assert (found["check"], found["severity"]) == ("errors", INFO), found


def test_the_pinned_kafka_python_clients_are_all_found():
    _, findings, _ = _findings("kafka39-legacy.pcap")
    found = {f["client_id"] for f in findings if f["check"] == "removed_api_versions"}
    producers = {f"kafka-python-{v}-producer-{c}" for v in ("0.8.2", "0.9", "0.10.0", "0.10.1")
                 for c in ("none", "gzip", "snappy", "lz4")}
    assert producers <= found
    by_client = {f["client_id"]: f for f in findings if f["check"] == "removed_api_versions"}
    assert [a["versions"] for a in by_client["kafka-python-0.8.2-producer-none"]["apis"]] == [[0]]
    assert {a["api_name"] for a in by_client["kafka-python-0.8.2-consumer"]["apis"]} == {"Fetch", "ListOffsets",
                                                                                          "OffsetCommit"}


def test_only_the_named_checks_run():
    doctor = Doctor(only=("lag",))
    assert [c.name for c in doctor.checks] == ["lag"]
