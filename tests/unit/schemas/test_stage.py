"""decode's schema stage: the committed capture (real confluent-kafka serializers) decoded by
`kinspect decode --json`, every value as it was serialized, from the capture alone."""

from __future__ import annotations

import pytest

from tests.unit.schemas.fixtures import CAPTURE, DATA_TOPICS, LOGS, expected, json_lines, kinspect



def _data_records(lines):
    """(how, topic, offset) -> record of every data record of the decode --json lines."""
    out = {}
    for line in lines:
        if line.get("type") != "exchange" or not line.get("response"):
            continue
        if line["api_key"] == 0:
            bases = {(t["name"], p["index"]): p["base_offset"]
                     for t in line["response"]["responses"] for p in t["partition_responses"]}
            for topic in line["request"]["topic_data"]:
                for part in topic["partition_data"]:
                    for batch in part["records"] or ():
                        for record in batch["records"]:
                            if topic["name"] in DATA_TOPICS:
                                offset = bases[(topic["name"], part["index"])] + record["offset"]
                                out[("produce", topic["name"], offset)] = record
        elif line["api_key"] == 1:
            for topic in line["response"]["responses"]:
                name = topic.get("topic") or topic.get("name")
                for part in topic["partitions"]:
                    for batch in part["records"] or ():
                        for record in batch["records"]:
                            if name in DATA_TOPICS:
                                out[("fetch", name, record["offset"])] = record
    return out


def _decode(*args):
    done = kinspect("decode", "--json", *args, CAPTURE)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _assert_decoded(stdout):
    got = _data_records(json_lines(stdout))
    want = expected()
    assert {(t, o) for how, t, o in got if how == "produce"} == set(want)
    assert {(t, o) for how, t, o in got if how == "fetch"} == set(want)
    for (how, topic, offset), record in got.items():
        entry = want[(topic, offset)]
        if entry["format"] is None:
            assert "value_schema" not in record
            continue
        about = record["value_schema"]
        assert about["format"] == entry["format"] and "error" not in about, (how, topic, offset, about)
        assert about.get("message") == entry.get("message")
        assert about["id"] and about.get("subject"), about  # an id registered under two subjects names one
        assert record["value"] == entry["value"], (how, topic, offset)
        if entry.get("key_format"):
            assert record["key_schema"]["subject"] == entry["key_subject"]
            assert record["key"] == entry["key"]


def test_the_capture_alone_decodes_every_value_as_serialized():
    _assert_decoded(_decode("--show-secrets"))


def test_secret_named_fields_are_redacted_without_show_secrets():
    got = _data_records(json_lines(_decode()))
    payment = got[("produce", "lab-avro", 1)]["value"]["payment"]
    assert payment["method"] == "card" and payment["api_password"].startswith("<redacted")


def test_stdin_learns_the_schemas_as_they_come():
    """No first pass on a pipe: the registry's Produce requests come before the clients' values
    in this capture, so every value decodes all the same."""
    import subprocess
    import sys
    with open(CAPTURE, "rb") as capture:
        done = subprocess.run([sys.executable, "-m", "kinspect", "decode", "--json", "--show-secrets", "-"],
                              stdin=capture, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    _assert_decoded(done.stdout.decode())


def test_with_schemas_from_the_log_dir_too():
    _assert_decoded(_decode("--show-secrets", "--schemas", LOGS))


def test_raw_values_keep_the_bytes():
    got = _data_records(json_lines(_decode("--raw-values")))
    want = expected()
    assert got
    for (how, topic, offset), record in got.items():
        assert "value_schema" not in record and "key_schema" not in record
        entry = want[(topic, offset)]
        if entry["format"] is not None:  # the bytes: text when they happen to be UTF-8, else b64
            assert isinstance(record["value"], str) or set(record["value"]) == {"b64"}, (topic, offset)
            assert record["value"] != entry["value"]


def test_one_process_and_workers_write_the_same_lines():
    one = _decode("--show-secrets", "-j1")
    assert one == _decode("--show-secrets", "-j2") == _decode("--show-secrets")
    _assert_decoded(one)


def test_unknown_ids_keep_their_bytes_with_one_notice(tmp_path):
    """A --schemas-topic no capture record has, and one schema file of another id: every framed
    value stays bytes with its id (or GUID), and each id is told once, saying where it was looked for."""
    (tmp_path / "99.avsc").write_text('"string"')
    done = kinspect("decode", "--json", "--schemas-topic", "_elsewhere", "--schemas", tmp_path, CAPTURE)
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stdout)
    got = _data_records(lines)
    want = expected()
    framed = [r for r in got.values() if "value_schema" in r]
    assert len(framed) == 2 * sum(1 for e in want.values() if e["format"] is not None)
    assert all(r["value_schema"].get("found") is False for r in framed)
    assert all(isinstance(r["value"], str) or set(r["value"]) == {"b64"} for r in framed)
    unknown = {r[f"{side}_schema"].get("id") or r[f"{side}_schema"].get("guid")
               for r in got.values() for side in ("key", "value") if f"{side}_schema" in r}
    notices = [line for line in lines if line.get("type") == "notice"]
    assert len(notices) == len(unknown) > 2, notices
    assert all("1 schema files in" in n["what"] for n in notices)
    assert done.stderr.count("is in no schema source") == len(unknown)
    # the workers' notices reach the main process: the same lines, the same order
    for jobs in ("-j1", "-j2"):
        again = kinspect("decode", "--json", jobs, "--schemas-topic", "_elsewhere", "--schemas", tmp_path, CAPTURE)
        assert (again.stdout, again.stderr) == (done.stdout, done.stderr), jobs


def test_protobuf_maps_are_written_in_key_order():
    """protobuf's parser orders a map by a hash seeded per process: without sorting, one run (or
    one worker) writes {"sku-1": 2, "sku-0": 1}, the next {"sku-0": 1, "sku-1": 2}."""
    for _ in range(4):
        got = _data_records(json_lines(_decode("-j1")))
        maps = [r["value"]["quantities"] for r in got.values()
                if isinstance(r["value"], dict) and len(r["value"].get("quantities") or ()) > 1]
        assert maps and all(list(m) == sorted(m) for m in maps), maps


def test_the_live_loop_learns_the_schemas_as_they_come():
    """sniff's and the proxy's loop (live/loop.py) with the stage, learning from the traffic: the
    capture read as a live source would be, every value decoded as serialized."""
    from kinspect.decode.finish import JSON
    from kinspect.decode.pipeline import DecodeRun
    from kinspect.live.loop import LiveLoop
    from kinspect.schemas.resolver import Schemas
    from kinspect.schemas.stage import ValueStage

    lines = []
    stage = ValueStage(Schemas(), show_secrets=True, learn=True)
    LiveLoop().run(DecodeRun(str(CAPTURE)), lambda output: lines.append(b"".join(output)), mode=JSON,
                   stages=(stage,))
    _assert_decoded("".join(line.decode() for line in lines))
    without = []
    LiveLoop().run(DecodeRun(str(CAPTURE)), lambda output: without.append(b"".join(output)), mode=JSON)
    assert without and b'"value_schema":{' not in b"".join(without)


@pytest.mark.parametrize("scan", ["c", "memmem", "find"])
def test_the_topic_is_found_wherever_it_lies_across_chunks(monkeypatch, scan):
    """mentions' scan: the name found at every position across the buffer's chunk boundaries, by
    the C scan (native.packets.holds), the C library's memmem and their bytearray.find twin; a
    near miss is not a mention."""
    import io

    from kinspect import native
    from kinspect.schemas import stage
    monkeypatch.setattr(stage, "CHUNK", 16)
    if scan == "c" and native.packets is None:
        scan = "memmem"  # the pure-Python run: the twins only
    if scan != "c":
        monkeypatch.setattr(native, "packets", None)
    if scan == "find":
        monkeypatch.setattr(stage, "_finder", lambda buffer, needle, end: (
            lambda needle, end: buffer.find(needle, 0, end) >= 0))
    for position in range(48):
        assert stage._holds(io.BytesIO(b"x" * position + b"_schemas" + b"y" * 3), b"_schemas"), position
    assert not stage._holds(io.BytesIO(b"x_schemaX" * 9 + b"_schema"), b"_schemas")


@pytest.mark.needs_c
def test_the_c_scan_answers_as_bytearray_find_does():
    """native.packets.holds against its twin, bytearray.find, on random buffers over a small
    alphabet (many near misses), for every byte of the needle as the one memchr looks for."""
    import random

    from kinspect import native
    rng = random.Random(36)
    for _ in range(3000):
        buffer = bytearray(rng.choice(b"ab_") for _ in range(rng.randrange(0, 40)))
        needle = bytes(rng.choice(b"ab_") for _ in range(rng.randrange(1, 5)))
        end = rng.randrange(0, len(buffer) + 1)
        for at in range(len(needle)):
            assert native.packets.holds(buffer, end, needle, at) == (buffer.find(needle, 0, end) >= 0)
    with pytest.raises(ValueError):
        native.packets.holds(bytearray(4), 5, b"x", 0)
    with pytest.raises(ValueError):
        native.packets.holds(bytearray(4), 4, b"x", 1)


def test_a_gzipped_capture_is_scanned_only_as_far_as_the_decode_may_read_it(monkeypatch, tmp_path):
    """The name past the gzip bound (the first max_batch_bytes, then max_file_ratio bytes per
    compressed byte) is where the decode never reads: the scan stops there, as it does on a bomb
    (it read all 2.1 GB of tests/hostile's 4.2 MB empty-records bomb); before it, it is found."""
    import gzip

    from kinspect.limits import Limits
    from kinspect.schemas import stage
    monkeypatch.setattr(stage, "CHUNK", 1 << 16)
    small = Limits(max_batch_bytes=1 << 20, max_file_ratio=2)
    far, near = tmp_path / "far.pcap.gz", tmp_path / "near.pcap.gz"
    far.write_bytes(gzip.compress(bytes(4 << 20) + b"_schemas"))
    near.write_bytes(gzip.compress(bytes(1 << 19) + b"_schemas"))
    assert not stage.mentions(str(far), "_schemas", small)
    assert stage.mentions(str(near), "_schemas", small)
    assert stage.mentions(str(far), "_schemas")  # the default bound reaches it: 64 MiB first


@pytest.mark.parametrize("max_records", ["3", "10"])
def test_batches_too_big_to_hold_decode_as_held_ones(max_records):
    """Records streamed (RecordStream) and batches streamed (BatchStream) go through the stage
    as they are read: the same lines as when held, every value decoded."""
    held = _decode("-j1", "--show-secrets")
    streamed = _decode("-j1", "--show-secrets", "--max-records", max_records)
    assert streamed == held
    _assert_decoded(streamed)
