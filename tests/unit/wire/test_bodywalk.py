"""bodywalk: the walk of a body's regular case (native/_bodies.c's walk, its twin walk_py) gives
what the generated decoder gives, key for key and in order, record sets decoded the same way,
or None; and None wherever the generated decoder has anything to report. On every body of every
committed capture, on random bodies of many API versions, on hand-built edges and on mutated
bytes."""

from __future__ import annotations

import random
import struct

import pytest

from kinspect import native
from kinspect.decode.pipeline import DecodeRun
from kinspect.limits import DEFAULT_LIMITS, Budget, Limits
from kinspect.problems import Problem
from kinspect.wire import bodywalk, messages
from kinspect.wire.decoder_runtime import run_decoder
from kinspect.wire.encode import encode_body
from kinspect.wire.exchange import RAW
from kinspect.wire.layouts import DEFINED, FIXED, layout
from tests.conftest import PCAPS
from tests.unit.native import needs_c

c_walk = native.bodies.walk if native.bodies is not None else None


def _prefix(key: int, version: int, kind: str) -> str:
    return f"P{key}{kind}v{version}"


def generated(key: int, version: int, kind: str, buf: bytes, start: int, raw: bool,
              limits: Limits = DEFAULT_LIMITS):
    """What the generated decoder gives (decode_body without the walk)."""
    return run_decoder(messages._compiled(key, version, kind), buf, 0, _prefix(key, version, kind), raw,
                       kind == "response", True, start, Budget(limits))


def walked(walker, key: int, version: int, kind: str, buf: bytes, start: int, raw: bool,
           limits: Limits = DEFAULT_LIMITS):
    prog = bodywalk.program(layout(key, version, kind))
    prefix = _prefix(key, version, kind)
    got = walker(buf, start, len(buf), prog, raw, limits.max_items, prefix)
    if got is None:
        return None
    return messages._with_record_sets(got, buf, 0, prefix, raw, kind == "response", True, Budget(limits))


def _shown(result) -> str:
    body, problems = result
    return repr((body, [p.to_dict() if isinstance(p, Problem) else p for p in problems]))


def agree(key: int, version: int, kind: str, buf: bytes, start: int = 0, raw: bool = False,
          limits: Limits = DEFAULT_LIMITS) -> bool:
    """walk_py (and C, when built) against the generated decoder; whether the walk held."""
    expected = generated(key, version, kind, buf, start, raw, limits)
    python = walked(bodywalk.walk_py, key, version, kind, buf, start, raw, limits)
    if c_walk is not None:
        c = walked(c_walk, key, version, kind, buf, start, raw, limits)
        assert (c is None) == (python is None), (key, version, kind, buf)
        if c is not None:
            assert _shown(c) == _shown(python)
    if python is None:
        return False
    assert _shown(python) == _shown(expected), (key, version, kind, buf)
    # a body the generated decoder reports anything about (other than its record sets) is not walked
    assert not [p for p in expected[1] if "records" not in p.path], (key, version, kind, expected[1])
    return True


def _bodies_of_captures():
    for path in sorted(PCAPS.glob("*.pcap*")):
        try:
            records = list(DecodeRun(str(path)).raw_records())
        except Exception:  # not a capture kinspect reads: other tests say so
            continue
        for record in records:
            raw = record.get(RAW)
            if raw is None:
                continue
            key, version = record["api_key"], record["api_version"]
            if layout(key, version, "request") is not None:
                yield key, version, "request", bytes(raw[0]), raw[1]
            if raw[2] is not None and layout(key, version, "response") is not None:
                yield key, version, "response", bytes(raw[2]), raw[3]


@pytest.fixture(scope="module")
def capture_bodies():
    return list(_bodies_of_captures())


def test_every_body_of_every_committed_capture(capture_bodies):
    held = 0
    for key, version, kind, buf, start in capture_bodies:
        for raw in (False, True):
            held += agree(key, version, kind, buf, start, raw)
    assert len(capture_bodies) > 1000 and held > 0.8 * 2 * len(capture_bodies), (held, len(capture_bodies))


def _value(f, rng: random.Random, depth: int):
    if f.nullable and rng.random() < 0.15:
        return None
    if f.array:
        return [_single(f, rng, depth) for _ in range(rng.randrange(3))]
    return _single(f, rng, depth)


def _single(f, rng: random.Random, depth: int):
    if f.type == "struct":
        return {m.key: _value(m, rng, depth + 1) for m in f.fields if m.tag is None}
    if f.type == "uuid":
        return "%08x-%04x-%04x-%04x-%012x" % tuple(rng.getrandbits(b) for b in (32, 16, 16, 16, 48))
    if f.type == "string":
        return rng.choice(["", "topic", "é→x", "a" * 130])
    if f.type in ("bytes", "records"):
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 3, 140])))
    if f.type == "bool":
        return rng.random() < 0.5
    if f.type == "float64":
        return rng.choice([0.0, -1.5, 1e300, float("inf")])
    code, size = FIXED[f.type]
    bits = size * 8
    low, high = (0, (1 << bits) - 1) if code.isupper() else (-(1 << bits - 1), (1 << bits - 1) - 1)
    return rng.choice([low, high, 0, 1, rng.randint(low, high)])


def test_random_bodies_of_many_versions():
    rng = random.Random(20261128)
    held = versions = 0
    # a third of the versions (compiling every generated decoder alone takes seconds), the
    # flexible Produce and Fetch ones always
    chosen = set(rng.sample(sorted(DEFINED), len(DEFINED) // 3))
    chosen |= {(k, v, kind) for k, v, kind in DEFINED if k in (0, 1) and v >= 9}
    for key, version, kind in sorted(chosen):
        lay = layout(key, version, kind)
        versions += 1
        for _ in range(1):
            body = {f.key: _value(f, rng, 0) for f in lay.fields if f.tag is None}
            try:
                buf = encode_body(key, version, kind, body)
            except Exception:  # a value the encoder refuses (a null where none may be): skip
                continue
            held += agree(key, version, kind, buf, 0, raw=True)
            held += agree(key, version, kind, buf, 0, raw=False)
    assert versions > 200 and held > versions, (held, versions)


def _produce_request(records: bytes, flexible: bool = True) -> bytes:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    return encode_body(0, 9 if flexible else 8, "request", body)


def test_the_edges():
    ok = _produce_request(b"")
    assert agree(0, 9, "request", ok)
    assert agree(0, 8, "request", _produce_request(b"", flexible=False))
    assert not agree(0, 9, "request", ok + b"\x00")                       # trailing bytes
    assert not agree(0, 9, "request", ok[:-1])                            # truncated
    tagged = ok[:-1] + b"\x01\x00\x00"                                    # a tagged field at the top
    assert not agree(0, 9, "request", tagged)
    # a string that is not UTF-8 stays bytes, as the generated decoder keeps it
    bad = bytearray(ok)
    at = bad.index(b"t")
    bad[at] = 0xFF
    assert agree(0, 9, "request", bytes(bad))
    assert walked(bodywalk.walk_py, 0, 9, "request", bytes(bad), 0, True)[0]["topic_data"][0]["name"] == b"\xff"
    # null in a non-nullable field (the topic name): the generated decoder warns, the walk gives up
    null_name = bytes(bad[:at - 1]) + b"\x00" + bytes(bad[at + 1:])
    assert not agree(0, 9, "request", null_name)
    # a length of five bytes, the last still continued: a fault
    assert not agree(0, 9, "request", b"\x80\x80\x80\x80\x80\x01" + ok[1:])
    # a two-byte varint length for a long topic name
    long_name = encode_body(0, 9, "request", {"transactional_id": None, "acks": 1, "timeout_ms": 1,
                                              "topic_data": [{"name": "n" * 200, "partition_data": []}]})
    assert agree(0, 9, "request", long_name)


def test_tagged_fields_known_walked_unknown_left_to_the_generated_decoder():
    partition = {"index": 0, "error_code": 6, "base_offset": -1, "log_append_time_ms": -1,
                 "log_start_offset": -1, "record_errors": [], "error_message": None}
    plain = {"responses": [{"name": "t", "partition_responses": [partition]}], "throttle_time_ms": 0}
    untagged = encode_body(0, 10, "response", plain)
    assert agree(0, 10, "response", untagged)
    partition["current_leader"] = {"leader_id": 1, "leader_epoch": 2}  # NOT_LEADER's hint, tag 0
    tagged = encode_body(0, 10, "response", plain)
    assert agree(0, 10, "response", tagged)
    got = walked(bodywalk.walk_py, 0, 10, "response", tagged, 0, True)[0]
    assert list(got["responses"][0]["partition_responses"][0])[-1] == "current_leader"
    # node_endpoints (tag 0 at the top), empty, as Tansu sends it in every Fetch response
    assert agree(0, 10, "response", untagged[:-1] + b"\x01\x00\x01\x01")
    # two of them: the second replaces the first, where it stood
    assert agree(0, 10, "response", untagged[:-1] + b"\x02\x00\x01\x01\x00\x01\x01")
    assert not agree(0, 10, "response", untagged[:-1] + b"\x01\x07\x01\x00")      # unknown tag 7
    assert not agree(0, 10, "response", untagged[:-1] + b"\x01\x00\x02\x01\x00")  # 1 of its 2 bytes used
    assert not agree(0, 10, "response", untagged[:-1] + b"\x01\x00\x05\x01")      # size past the end
    assert not agree(0, 10, "response", untagged[:-1] + b"\x01\x00")               # size missing


def test_more_array_entries_than_the_limit_are_not_walked():
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 1,
            "topic_data": [{"name": "t", "partition_data": [{"index": i, "records": None}
                                                            for i in range(5)]}]}
    buf = encode_body(0, 9, "request", body)
    assert agree(0, 9, "request", buf, limits=Limits(max_items=6))
    assert not agree(0, 9, "request", buf, limits=Limits(max_items=5))


def test_record_sets_decoded_in_order_with_their_paths(capture_bodies):
    produce = [(k, v, kind, buf, start) for k, v, kind, buf, start in capture_bodies
               if k == 0 and kind == "request" and len(buf) > 200]
    assert produce
    key, version, kind, buf, start = produce[0]
    body, problems = walked(bodywalk.walk_py, key, version, kind, buf, start, False)
    records = body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, list) and records and records[0]["magic"] == 2
    got = bodywalk.walk_py(buf, start, len(buf), bodywalk.program(layout(key, version, kind)), False,
                           DEFAULT_LIMITS.max_items, "X")
    assert got[1][0][4] == "X → topic_data[0] → partition_data[0] → records"


def test_mutated_bodies_and_huge_counts(capture_bodies):
    rng = random.Random(36)
    sample = rng.sample(capture_bodies, min(300, len(capture_bodies)))
    for key, version, kind, buf, start in sample:
        for _ in range(10):
            mutated = bytearray(buf)
            for _ in range(rng.randrange(1, 4)):
                at = rng.randrange(start, len(buf)) if len(buf) > start else start
                if at < len(mutated):
                    mutated[at] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
            cut = rng.choice([len(mutated), rng.randrange(start, len(mutated) + 1)])
            agree(key, version, kind, bytes(mutated[:cut]), start, raw=rng.random() < 0.5)
    # an array count of 2**31 - 1 over a few bytes, compact and not: given up at once
    assert not agree(0, 8, "request", b"\xff\xff" + struct.pack(">hi", 1, 1) + b"\x7f\xff\xff\xff")
    assert not agree(0, 9, "request", b"\x00" + struct.pack(">hi", 1, 1) + b"\xff\xff\xff\xff\x07")


@needs_c
def test_c_refuses_what_is_not_its_input():
    prog = bodywalk.program(layout(0, 9, "request"))
    with pytest.raises(TypeError):
        c_walk(bytearray(b"\x00"), 0, 1, prog, True, 10, "p")
    with pytest.raises(ValueError):
        c_walk(b"\x00", 0, 2, prog, True, 10, "p")
    assert c_walk(b"\x00", 1, 0, prog, True, 10, "p") is None  # no body: the generated decoder reports it
    assert bodywalk.walk_py(b"\x00", 1, 0, prog, True, 10, "p") is None
