import struct

from kinspect.groups.commit_records import decode_commit
from kinspect.storage.offsets_records import decode_offsets_record
from kinspect.storage.segment import walk_segment
from tests.unit.groups.handmade import offset_key, offset_value
from tests.unit.groups.sample_oracles import EXPIRY, KAFKA4, LEGACY, commits, dumped, offsets_dirs

SAMPLES = (KAFKA4, EXPIRY, LEGACY)


def real_records():
    """Every record of the samples' __consumer_offsets (Kafka 4.1.2, its expiry run, 3.9.2)."""
    for sample in SAMPLES:
        for directory in offsets_dirs(sample):
            for log in sorted(directory.glob("*.log")):
                for kind, unit, _ in walk_segment(log.read_bytes(), str(log)):
                    if kind == "batch" and not unit.get("is_control"):
                        yield from unit["records"]


def dumped_commits() -> list[dict]:
    """kafka-dump-log's offset commit records of the same partitions."""
    return [r for sample in SAMPLES for d in offsets_dirs(sample) for r in commits(dumped(d))]


def general(key, value):
    decoded, problems = decode_offsets_record(key, value)
    if decoded["record_type"] not in (0, 1) or any(p.severity == "error" for p in problems):
        return None
    if decoded["value"] is not None and not isinstance(decoded["value"], dict):
        return None
    k = decoded["key"]
    return k["group"], k["topic"], k["partition"], decoded["value"]


def test_same_result_as_the_general_decoder_on_every_real_commit():
    """Every commit kafka-dump-log printed (value v4 from Kafka 4.1.2, v1 from 3.9.2's 0.10.0
    coordinator, tombstones) takes the fast path, with the general decoder's result."""
    fast = []
    seen_versions = set()
    for record in real_records():
        got = decode_commit(record["key"], record["value"])
        expected = general(record["key"], record["value"])
        if expected is not None:
            assert got == expected
            fast.append(got)
            seen_versions.add(int.from_bytes(record["value"][:2]) if record["value"] else None)
        else:
            assert got is None
    theirs = dumped_commits()
    assert [(g, t, p, v and (v["offset"], v["metadata"], v["commit_timestamp"]))
            for g, t, p, v in fast] == [
        (k["group"], k["topic"], k["partition"],
         v and (v["offset"], v["metadata"], v["commitTimestamp"]))
        for k, v in ((r["key"]["data"], r["payload"] and r["payload"]["data"]) for r in theirs)]
    assert seen_versions == {r["payload"] and int(r["payload"]["version"]) for r in theirs}
    assert {1, 4, None} <= seen_versions


def test_every_cut_of_a_real_record_is_none_or_what_the_general_decoder_says():
    for record in real_records():
        key, value = record["key"], record["value"]
        for cut in range(len(key)):
            assert decode_commit(key[:cut], value) in (None, general(key[:cut], value))
        for cut in range(len(value or b"")):
            assert decode_commit(key, value[:cut]) in (None, general(key, value[:cut]))


def test_other_versions_and_shapes_fall_back():
    key = offset_key("g", "t", 0)
    v1 = struct.pack(">hq", 1, 5) + b"\x00\x01m" + struct.pack(">qq", 10, 20)
    assert decode_commit(key, v1)[3] == {"offset": 5, "metadata": "m", "commit_timestamp": 10,
                                         "expire_timestamp": 20}
    assert decode_commit(key, v1)[3] == general(key, v1)[3]
    v3 = offset_value(7, "m", leader_epoch=2)  # the samples' brokers wrote v1 and v4, not v3
    assert decode_commit(key, v3) == general(key, v3) == ("g", "t", 0, {
        "offset": 7, "leader_epoch": 2, "metadata": "m", "commit_timestamp": 1_700_000_000_000})
    assert decode_commit(key, b"\x00\x05" + offset_value(1)[2:]) is None      # unknown version
    assert decode_commit(b"\x00\x02" + key[2:], offset_value(1)) is None        # not a commit
    not_utf8 = struct.pack(">hqi", 3, 1, 0) + b"\x00\x01\xff" + struct.pack(">q", 9)
    assert decode_commit(key, not_utf8) is None
    tagged = struct.pack(">hqi", 4, 1, 0) + b"\x01" + struct.pack(">q", 9) + b"\x01\x00\x00"
    assert decode_commit(key, tagged) is None
