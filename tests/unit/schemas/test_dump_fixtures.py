"""kinspect dump of the recorded log dir: every value confluent-kafka's real serializers wrote
comes out as it was serialized (the manifest), with its schema beside it."""

from __future__ import annotations

import base64
import json
import shutil

import pytest

from tests.unit.schemas.fixtures import (LOGS, dumped_records, expected, json_lines, kinspect,
                                         manifest)


DATA_DIRS = sorted(p for p in LOGS.iterdir() if not p.name.startswith("_schemas"))


def _check(records: dict, secrets_shown: bool) -> int:
    want = expected()
    assert set(records) == set(want)
    checked = 0
    for where, entry in want.items():
        got = records[where]
        if entry["format"] is None:  # no schema wrote it: left as it is (--decode auto parses JSON)
            plain = entry["value"]
            plain = json.loads(plain) if isinstance(plain, str) and plain.startswith("{") else plain
            assert "value_schema" not in got and got["value"] == plain, where
            continue
        about = got["value_schema"]
        assert about["format"] == entry["format"], where
        assert "error" not in about and about.get("found", True), (where, about)
        if entry["format"] == "protobuf":
            assert about["message"] == entry["message"], where
        value = entry["value"]
        if not secrets_shown:
            value = _redacted(value)
        assert got["value"] == value, where
        if entry.get("key_format"):
            assert got["key_schema"]["format"] == entry["key_format"]
            assert got["key_schema"]["subject"] == entry["key_subject"]
            assert got["key"] == entry["key"], where
        else:
            assert "key_schema" not in got and got["key"] == entry["key"], where
        checked += 1
    return checked


def _redacted(value):
    if isinstance(value, dict):
        return {k: (f"<redacted {len(v.encode())} bytes>" if k.endswith("password") and isinstance(v, str)
                    else _redacted(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def test_dump_with_schemas_logdir_decodes_every_value_as_serialized():
    done = kinspect("dump", "--json", "--data", "--show-secrets", "--schemas", LOGS, *DATA_DIRS)
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stdout)
    assert _check(dumped_records(lines), secrets_shown=True) == 42
    assert not [line for line in lines if line.get("type") == "notice"]


def test_dump_of_the_log_dir_finds_its_own_schemas_without_a_flag():
    done = kinspect("dump", "--json", "--data", "--show-secrets", LOGS)
    assert done.returncode == 0, done.stderr
    assert _check(dumped_records(json_lines(done.stdout)), secrets_shown=True) == 42


def test_secret_fields_of_decoded_values_are_redacted_by_default():
    done = kinspect("dump", "--json", "--data", LOGS)
    assert done.returncode == 0, done.stderr
    records = dumped_records(json_lines(done.stdout))
    _check(records, secrets_shown=False)
    assert "pw-1" not in done.stdout and "refund-pw-0" not in done.stdout


def test_raw_values_keeps_the_bytes(tmp_path):
    done = kinspect("dump", "--json", "--data", "--raw-values", LOGS / "lab-avro-0")
    assert done.returncode == 0, done.stderr
    records = dumped_records(json_lines(done.stdout))
    assert records and all("value_schema" not in r and "key_schema" not in r for r in records.values())
    first = records[("lab-avro", 0)]["value"]
    raw = base64.b64decode(first["b64"]) if isinstance(first, dict) else first.encode()
    assert raw[:1] == b"\x00" and int.from_bytes(raw[1:5], "big") == 3


def test_text_output_names_the_schema(tmp_path):
    done = kinspect("dump", "--data", LOGS / "lab-proto-0")
    assert done.returncode == 0, done.stderr
    assert "(protobuf id 5 lab.orders.Shipment.Parcel)" in done.stdout
    assert '"order_id":"o-1"' in done.stdout


def test_unknown_ids_keep_their_bytes_and_one_notice_says_where_schemas_were_looked_for(tmp_path):
    """The data without _schemas, schemas from a directory that lacks most of them."""
    for source in DATA_DIRS:
        shutil.copytree(source, tmp_path / "logs" / source.name)
    files = tmp_path / "files"
    files.mkdir()
    retired = next(r for r in manifest()["registry_records"]
                   if r["key"].get("subject") == "lab-retired-value" and r["value"])
    (files / f"{retired['value']['id']}.avsc").write_text(retired["value"]["schema"])
    done = kinspect("dump", "--json", "--data", "--schemas", files, tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stdout)
    records = dumped_records(lines)
    assert records[("lab-retired", 0)]["value"] == {"order_id": "retired-0", "region": 0}
    avro = records[("lab-avro", 0)]
    assert avro["value_schema"] == {"id": 3, "found": False}
    assert isinstance(avro["value"], dict) and "b64" in avro["value"]
    notices = [line for line in lines if line.get("type") == "notice"]
    unknown = sorted(n["what"] for n in notices if n.get("check") == "schema_unknown")
    assert len(unknown) == 4 + 2  # ids 2, 3, 5, 6 (all but the file's 7), and the two GUIDs of lab-headers
    assert all("schema files in" in what for what in unknown)
    assert done.stderr.count("is in no schema source") == len(unknown)
