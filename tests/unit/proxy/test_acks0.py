"""Produce with acks=0 through the stream seam, as the proxy feeds it: the exchange comes out at
once, expecting no response, and neither the summary nor the live figures count it missing."""

from kinspect.capture.stream import StreamData, StreamEnd, StreamOpen
from kinspect.live.stats import LiveStats
from kinspect.decode.pipeline import DecodeRun
from kinspect.decode.summary import Summary
from kinspect.wire.encode import encode_request

CLIENT = (b"\x7f\x00\x00\x01", 40000, b"\x7f\x00\x00\x01", 19092)
SERVER = (CLIENT[2], CLIENT[3], CLIENT[0], CLIENT[1])


class Streams:
    size = None
    bytes_read = 0

    def __init__(self, events):
        self.events, self.problems = events, []

    def streams(self):
        yield from self.events

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def test_acks_0_produce_is_not_a_missing_response():
    body = {"transactional_id": None, "acks": 0, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}]}
    requests = encode_request(0, 9, 1, "fire-and-forget", body) + encode_request(0, 9, 2, "fire-and-forget", body)
    run = DecodeRun(Streams([StreamOpen(CLIENT, 1.0), StreamData(CLIENT, 1.0, requests),
                             StreamEnd(CLIENT, 2.0, "closed"), StreamEnd(SERVER, 2.0, "closed")]))
    records = list(run.records())
    assert [(r["correlation_id"], r["response"], r.get("response_expected")) for r in records] == \
        [(1, None, False), (2, None, False)]
    assert records[0]["conn"] == "127.0.0.1:40000-127.0.0.1:19092"
    stats, summary = LiveStats(), Summary()
    for r in records:
        stats.add(r)
        summary.add(r)
    assert stats.snapshot()["requests"] == {"Produce": 2} and stats.snapshot()["unanswered"] == {}
    assert [(row["count"], row["unanswered"]) for row in summary.rows()] == [(2, 0)]
