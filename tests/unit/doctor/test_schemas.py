"""doctor's schemas check: framed values whose id is unknown (info) or that do not decode
against their schema (warning), on the capture of real confluent-kafka serializers, with the
exchanges that hold them as evidence (found here from decode --json on its own)."""

from __future__ import annotations

from kinspect.doctor.finding import INFO, WARNING
from kinspect.doctor.options import Thresholds
from kinspect.doctor.run import Doctor
from tests.unit.decode.test_schema_counts import counted, schema_dir
from tests.unit.doctor.handmade import exchange
from tests.unit.schemas.fixtures import CAPTURE, json_lines, kinspect


def _holding(lines, schema_id, side="value"):
    """(conn, correlation id) of the exchanges with a record framed by ``schema_id``."""
    out = []
    for line in lines:
        if line.get("type") != "exchange" or line["api_key"] not in (0, 1):
            continue
        if counted([line]) and any(k[1] == side and k[2] == schema_id for k in counted([line])):
            out.append((line["conn"], line["correlation_id"]))
    return out


def test_findings_on_the_lab_capture(tmp_path):
    args = ("--schemas", schema_dir(tmp_path), "--schemas-topic", "nope", CAPTURE)
    done = kinspect("doctor", "--json", "--check", "schemas", *args)
    assert done.returncode == 1, done.stderr  # a warning
    findings = [f for f in json_lines(done.stdout) if f["type"] == "finding"]
    decoded = json_lines(kinspect("decode", "--json", *args).stdout)
    expected = counted(decoded)
    by_schema = {}
    for (api, side, ident, subject, form, result), n in expected.items():
        if result != "decoded":
            key = (result, side, ident)
            by_schema[key] = by_schema.get(key, 0) + n
    assert {(f["outcome"], f["side"], f["schema_id"] if f["schema_id"] is not None else f["guid"]): f["count"]
            for f in findings} == by_schema
    failed = next(f for f in findings if f["outcome"] == "failed")
    assert failed["severity"] == WARNING and failed["schema_id"] == 7 and failed["subject"] == "7.avsc"
    assert failed["format"] == "avro" and failed["error"] and isinstance(failed["payload_offset"], int)
    assert failed["first"]["topic"] == "lab-retired" and failed["topics"] == [{"topic": "lab-retired", "count": 4}]
    assert [(e["conn"], e["correlation_id"]) for e in failed["evidence"]] == _holding(decoded, 7)
    assert all(isinstance(e["time"], float) for e in failed["evidence"])
    unknown = [f for f in findings if f["outcome"] == "unknown"]
    assert unknown and all(f["severity"] == INFO for f in unknown)
    three = next(f for f in unknown if f["schema_id"] == 3)
    assert [(e["conn"], e["correlation_id"]) for e in three["evidence"]] == _holding(decoded, 3)


def test_no_finding_when_every_value_decodes():
    done = kinspect("doctor", "--json", "--check", "schemas", CAPTURE)
    assert done.returncode == 0, done.stderr
    assert [f for f in json_lines(done.stdout) if f["type"] == "finding"] == []


def _produce(abouts, client_id="app", correlation_id=1):
    records = [{"offset": n, "value": b"x", "value_schema": about} for n, about in enumerate(abouts)]
    return exchange(0, {"topic_data": [{"name": "t", "partition_data": [
        {"index": 0, "records": [{"records": records}]}]}]}, {"responses": []},
        client_id=client_id, correlation_id=correlation_id)


def test_brokers_own_traffic_is_not_counted_and_state_is_bounded():
    doctor = Doctor(Thresholds(max_state=2), only=("schemas",))
    doctor.exchange(_produce([{"id": 9, "found": False}], client_id="broker-1-txn-marker-sender"))
    for n in range(4):
        doctor.exchange(_produce([{"id": n, "found": False}] * 3, correlation_id=n))
    findings, notices = doctor.finish()
    assert sorted(f["schema_id"] for f in findings) == [2, 3]
    assert all(f["count"] == 3 and len(f["evidence"]) == 1 for f in findings)
    assert notices[0]["check"] == "schemas" and notices[0]["dropped"] == 2
