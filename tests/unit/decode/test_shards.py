"""DecodeRun(flows=...) and kinspect.decode.shards: runs of a capture's connections in K shards give one
run's records wherever not_whole finds nothing, and not_whole finds the cases where they do not."""

import struct
from collections import Counter, defaultdict

import pytest

from kinspect.capture import pcap
from kinspect.limits import Limits
from kinspect.decode.pipeline import NOTICES_AT_ONCE, DecodeRun
from kinspect.render.jsonl import pieces
from kinspect.decode.shards import end_problems, not_whole
from tests.conftest import PCAPS, REALDATA
from tests.unit.capture.helpers import pcap_file
from tests.unit.native import needs_c

CAPTURES = sorted(p for p in PCAPS.iterdir() if p.suffix in (".pcap", ".pcapng")) + \
    [REALDATA / "arkime/kafka.pcap", REALDATA / "go-sniffer/kafka.pcap", REALDATA / "ndpi/kafka.pcapng"]
RAW_IP = 101


def _by_conn(records) -> dict:
    """Lines per connection, in order; the counting notices of the capture's end left out."""
    out = defaultdict(list)
    for r in records:
        if not (r["type"] == "notice" and "more" in r):
            out[r.get("conn", "")].append(b"".join(pieces(r, newline=True)))
    return dict(out)


def _shards(source, shards: int, **options):
    runs = [DecodeRun(source, flows=(i, shards), **options) for i in range(shards)]
    records = [list(run.records()) for run in runs]
    return runs, records, [run.flows_report() for run in runs]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("shards", [2, 3])
def test_shards_by_connection_give_one_runs_records_unless_not_whole_says_why(capture, shards):
    whole_run = DecodeRun(str(capture))
    whole = list(whole_run.records())
    runs, parts, reports = _shards(str(capture), shards)
    merged: dict = {}
    for part in parts:
        for conn, lines in _by_conn(part).items():
            assert conn not in merged or conn == "", "a connection decoded by two shards"
            merged.setdefault(conn, []).extend(lines)
    assert all(run.packets == whole_run.packets for run in runs)
    assert all(run.tcp_packets == whole_run.tcp_packets for run in runs)
    reasons = not_whole(reports)
    if reasons:  # only the Java clients name topics by id learned on another connection
        assert capture.name.startswith("java-console-"), reasons
        assert all("was named on another shard's connection" in r for r in reasons)
        return
    assert merged == _by_conn(whole)  # per connection, in order
    assert sum(sum(r["end_notices"].values()) for r in reports) == sum(whole_run.end_notices.values())


def test_a_topic_named_on_another_shards_connection_is_found_and_does_differ():
    """The Java producer's Produce v13 names its topic by id; the Metadata that named it came on
    another connection, which the other shard decodes: the shard alone cannot name it."""
    capture = str(PCAPS / "java-console-producer.pcap")
    whole = _by_conn(DecodeRun(capture).records())
    runs, parts, reports = _shards(capture, 2)
    reasons = not_whole(reports)
    assert reasons and all("was named on another shard's connection" in r for r in reasons)
    merged = {conn: lines for part in parts for conn, lines in _by_conn(part).items()}
    assert merged != whole  # the difference the check exists for


@needs_c
def test_the_c_reader_and_the_python_loop_leave_out_the_same_packets(monkeypatch):
    capture = str(PCAPS / "kafka39-legacy.pcap")
    fast_runs, fast, _ = _shards(capture, 3)
    assert all(run.unread > 0 for run in fast_runs)
    monkeypatch.setattr(pcap, "_fast_records", None)
    slow_runs, slow, _ = _shards(capture, 3)
    assert [_by_conn(r) for r in slow] == [_by_conn(r) for r in fast]
    assert all(run.unread == 0 for run in slow_runs)


@pytest.mark.parametrize("capture", ["aiokafka-mtu1500.pcapng", "kafka39-legacy-mtu1500.pcapng"])
@pytest.mark.parametrize("batch_bytes", [1 << 10, 16 << 10, 256 << 10])
def test_a_files_decompression_budget_spent_beyond_its_grants_is_found(capture, batch_bytes):
    """One run's budget (limits.Budget) is shared by its exchanges: each grants max_file_ratio
    bytes of decompression per byte, on top of max_batch_bytes. With a ratio of 1, compressed
    batches draw on the shared part, so a shard alone would decompress what one run cuts."""
    limits = Limits(max_file_ratio=1, max_batch_bytes=batch_bytes)
    path = str(PCAPS / capture)
    whole = list(DecodeRun(path, limits=limits).records())
    cut = any("--max-file-ratio" in p["what"] for r in whole for p in r.get("problems", []))
    _, parts, reports = _shards(path, 2, limits=limits)
    merged = {conn: lines for part in parts for conn, lines in _by_conn(part).items()}
    reasons = not_whole(reports)
    if batch_bytes == 16 << 10:
        assert cut and merged != _by_conn(whole)  # the case exists
    if not reasons:
        assert merged == _by_conn(whole)
    else:
        assert any(r.startswith("decompressed bytes beyond grants") for r in reasons)


# ---- the bounds shared by every connection, and the capture's end ----

def _frame(src_port: int, dst_port: int, seq: int, flags: int, payload: bytes = b"") -> bytes:
    """A raw IPv4 + TCP frame, 10.0.0.1:src_port -> 10.0.0.2:dst_port (the reverse for replies)."""
    client = src_port != 9092
    src, dst = (b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02") if client else (b"\x0a\x00\x00\x02", b"\x0a\x00\x00\x01")
    tcp = struct.pack("!HHIIBBHHH", src_port, dst_port, seq, 0, 0x50, flags, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0, 64, 6, 0, src, dst)
    return ip + tcp + payload


SYN, ACK = 0x02, 0x10


def _open_connections(n: int, partial: bool) -> bytes:
    """``n`` connections to port 9092 left open at the capture's end, each with an ApiVersions
    request whose frame is cut short (``partial``) or whole."""
    request = struct.pack("!hhi", 18, 0, 1) + struct.pack("!h", 3) + b"abc"
    frame = struct.pack("!i", len(request)) + request
    frames = []
    for i in range(n):
        port = 40000 + i
        frames.append(_frame(port, 9092, 1000, SYN))
        frames.append(_frame(port, 9092, 1001, ACK, frame[:-4] if partial else frame))
    return pcap_file(frames, RAW_IP)


@pytest.mark.parametrize("partial", [False, True])
def test_the_capture_ends_cap_counts_as_one_run_over_the_shards(tmp_path, partial):
    path = tmp_path / "open.pcap"
    path.write_bytes(_open_connections(3 * NOTICES_AT_ONCE, partial))
    whole_run = DecodeRun(str(path))
    whole = list(whole_run.records())
    runs, parts, reports = _shards(str(path), 3)
    assert not not_whole(reports)
    notices = [r for r in whole if r["type"] == "notice"]
    assert len(notices) == (NOTICES_AT_ONCE + 1 if partial else 0)  # partial frames: 30 resync notices, capped
    assert sum(whole_run.end_notices.values()) == sum(sum(r["end_notices"].values()) for r in reports)
    shard_notices = sum(1 for part in parts for r in part if r["type"] == "notice")
    assert shard_notices == sum(sum(r["end_notices"].values()) for r in reports)  # none capped
    assert end_problems(reports) == len(notices)  # capped as the whole run caps them
    exchanges = Counter(b"".join(pieces(r, newline=True)) for r in whole if r["type"] == "exchange")
    assert exchanges == Counter(b"".join(pieces(r, newline=True)) for p in parts for r in p if r["type"] == "exchange")


def test_more_connections_than_the_bound_makes_the_shards_not_whole(tmp_path):
    path = tmp_path / "many.pcap"
    path.write_bytes(_open_connections(12, partial=False))
    _, _, reports = _shards(str(path), 2, max_connections=4)  # 8 directions open at once at most
    assert any(r.startswith("directions open: up to") for r in not_whole(reports))
    _, _, reports = _shards(str(path), 2, max_connections=40)
    assert not not_whole(reports)


# ---- not_whole on reports ----

def _report(peaks=None, learned=None, unnamed=None, overflow=False, end=None) -> dict:
    limits = {"directions open": 10, "out-of-order bytes": 100}
    return {"shard": [0, 2], "limits": limits, "peaks": {"directions open": 0, "out-of-order bytes": 0, **(peaks or {})},
            "learned": learned or {}, "unnamed": unnamed or {}, "overflow": overflow, "end_notices": end or {}}


def test_not_whole_adds_the_shards_peaks_against_each_bound():
    assert not_whole([_report({"directions open": 5}), _report({"directions open": 5})]) == []
    assert not_whole([_report({"directions open": 6}), _report({"directions open": 5})]) == \
        ["directions open: up to 11 in the shards together, past the bound of 10"]


def test_not_whole_on_topic_ids():
    named_at_5 = _report(learned={"t1": [5, ["orders"]]})
    assert not_whole([named_at_5, _report(unnamed={"t1": 4})]) == []  # looked up before anyone named it
    assert not_whole([named_at_5, _report(unnamed={"t1": 5})]) != []  # the same moment: order unknown
    assert not_whole([named_at_5, _report(unnamed={"t1": 9})]) != []
    assert not_whole([named_at_5, _report(learned={"t1": [2, ["orders"]]})]) == []  # the same name
    assert "2 names" in not_whole([named_at_5, _report(learned={"t1": [2, ["payments"]]})])[0]
    assert not_whole([named_at_5, _report(overflow=True)]) != []


def test_end_problems_caps_each_kind_over_all_shards():
    n = NOTICES_AT_ONCE
    assert end_problems([_report(end={"gap": 4}), _report(end={"gap": 3, "cut": 1})]) == 8
    assert end_problems([_report(end={"gap": n}), _report(end={"gap": 5})]) == n + 1  # the rest counted in one


def test_an_id_given_many_names_keeps_two_and_still_fails_the_check():
    """A hostile capture naming one id a million ways: a shard keeps two names, enough for the check."""
    from kinspect.wire.topics import RecordedTopicNames
    topics = RecordedTopicNames()
    for i in range(10_000):
        topics.learn(3, {"topics": [{"topic_id": "t1", "name": f"n{i}"}]})
    assert topics.learned["t1"][1] == ["n0", "n1"]
    assert "2 names" in not_whole([_report(learned=topics.learned), _report()])[0]
