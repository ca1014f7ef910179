"""A gzip'ed capture costs bounded work (issue 30, item 9): capture/source.py bounds what its
gzip inflates to, counting each packet at least PACKET_WORK bytes, and the pipeline charges each
Kafka frame FRAME_WORK more, since a frame costs time whatever its size."""

import gzip
import random
from pathlib import Path

from kinspect.capture.source import open_capture
from kinspect.limits import Limits
from kinspect.decode.pipeline import FRAME_WORK, DecodeRun
from kinspect.decode.shards import not_whole
from tests.hostile.kafka import request, response
from tests.hostile.packets import ACK, PSH, Connection, PcapWriter

NO_FLOOR = Limits(max_batch_bytes=0)  # only the ratio: 100 bytes of work per compressed byte


def _gzip(path: Path) -> Path:
    packed = path.with_name(path.name + ".gz")
    packed.write_bytes(gzip.compress(path.read_bytes(), 9))
    return packed


def _frames_bomb(tmp_path: Path) -> Path:
    """Segments of 250 frames of size 0 and one of 100 random bytes, on port 9092: about 12 bytes
    per compressed byte, within the bound as bytes, but 250 frames per 100 compressed bytes."""
    rng = random.Random(9)
    with PcapWriter(tmp_path / "frames.pcap") as out:
        conn = Connection(out)
        conn.handshake()
        for _ in range(60):
            payload = b"".join(bytes(1000) + (100).to_bytes(4, "big") + rng.randbytes(100) for _ in range(50))
            conn.client_segment(0, payload, ACK | PSH)
            conn.client_seq += len(payload)
    return _gzip(tmp_path / "frames.pcap")


def _heartbeats(tmp_path: Path, count: int) -> Path:
    """A consumer doing nothing but heartbeats: the smallest exchanges, four packets each, as
    densely as an honest capture holds them (one a microsecond)."""
    with PcapWriter(tmp_path / "heartbeats.pcap") as out:
        conn = Connection(out)
        conn.handshake()
        for i in range(count):
            conn.send(request(12, 4, i, {"group_id": "group", "generation_id": 7, "member_id": "consumer-1-abc",
                                         "group_instance_id": None}))
            conn.reply(response(12, 4, i, {"throttle_time_ms": 0, "error_code": 0}))
        conn.close()
    return _gzip(tmp_path / "heartbeats.pcap")


def test_frames_count_as_work_in_a_gzipped_capture(tmp_path):
    path = _frames_bomb(tmp_path)
    with open_capture(path, NO_FLOOR) as capture:  # as bytes and packets alone, within the bound
        assert sum(1 for _ in capture.packets()) == 64 and capture.problems == []
    run = DecodeRun(path, limits=NO_FLOOR)
    records = list(run.records())
    assert [(p.path, p.check) for p in run.capture_problems] == [("gzip", "decompress")]
    what = run.capture_problems[0].what
    assert f"each Kafka frame {FRAME_WORK} more" in what and "raise it with --max-file-ratio" in what
    assert run.packets < 64 and records[-1]["more"] < 60 * 50 * 251


def test_honest_heartbeats_inflate_within_the_bound_without_its_first_allowance(tmp_path):
    run = DecodeRun(_heartbeats(tmp_path, 3000), limits=NO_FLOOR)
    exchanges = [r for r in run.records() if r["type"] == "exchange"]
    assert len(exchanges) == 3000 and run.capture_problems == []
    assert all(e["response"] == {"throttle_time_ms": 0, "error_code": 0} for e in exchanges)


def test_shards_tell_when_the_whole_run_would_have_stopped_for_frames(tmp_path):
    """A run of some connections counts only its own frames: its report says how much of the
    bound they took, and the shards' sum says whether one run would have stopped."""
    def reports(path):
        out = []
        for shard in range(2):
            run = DecodeRun(path, limits=NO_FLOOR, flows=(shard, 2))
            list(run.records())
            out.append(run.flows_report())
        return out

    assert not_whole(reports(_heartbeats(tmp_path, 500))) == []
    reasons = not_whole(reports(_frames_bomb(tmp_path)))
    assert len(reasons) == 1 and reasons[0].startswith("gzip work for frames")
