"""The packet-source seam of pipeline.py: a live source (packets plus ticks) goes through the
same path as a file, and the ticks expire pending requests and idle connections (issue 12)."""

import json

from kinspect.capture.source import open_capture
from kinspect.capture.stream import TICK
from kinspect.decode.pipeline import DecodeRun
from kinspect.render.jsonl import dumps
from tests.conftest import PCAPS

CAPTURE = PCAPS / "librdkafka-produce-consume.pcapng"


class ListSource:
    """A PacketSource over a list of packets and ticks, as capture/live.py's sources yield them."""

    size = None
    bytes_read = 0

    def __init__(self, packets):
        self.items = packets
        self.problems = []

    def packets(self):
        yield from self.items

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def close(self):
        pass


def _packets():
    with open_capture(str(CAPTURE)) as capture:
        return [(ts, lt, bytes(data), n) for ts, lt, data, n in capture.packets()]


def _lines(run):
    return [json.loads(dumps(r)) for r in run.records()]


def test_a_packet_source_with_ticks_decodes_as_the_file_does():
    packets = _packets()
    ticked = []
    for i, p in enumerate(packets):
        ticked.append(p)
        if i % 7 == 0:
            ticked.append((p[0], TICK, b"", 0))
    ticks = []
    live = DecodeRun(ListSource(ticked), pending_timeout=3600, idle_timeout=3600, on_tick=ticks.append)
    expected = _lines(DecodeRun(str(CAPTURE)))
    assert _lines(live) == expected
    assert len(ticks) == len(packets[::7]) and len(expected) > 30


def test_a_request_past_the_pending_timeout_goes_out_with_no_response_and_its_late_response_is_an_orphan():
    packets = _packets()
    first = next(r for r in DecodeRun(str(CAPTURE)).records()
                 if r["type"] == "exchange" and r["response"] is not None and r["latency_ms"] > 0.1)
    cut = max(i for i, p in enumerate(packets) if p[0] <= first["request_time"])
    now = first["request_time"] + 5
    source = packets[:cut + 1] + [(now, TICK, b"", 0)] + [(now + p[0] - packets[0][0], *p[1:]) for p in packets[cut + 1:]]
    records = list(DecodeRun(ListSource(source), pending_timeout=1.0).records())
    key = (first["conn"], first["correlation_id"])
    mine = [r for r in records if (r.get("conn"), r.get("correlation_id")) == key]
    assert mine[0]["type"] == "exchange" and mine[0]["response"] is None
    assert any("no response within 1 s (--pending-timeout)" in p["what"] for p in mine[0]["problems"])
    assert [r["type"] for r in mine[1:]] == ["orphan_response"]


def test_connections_idle_past_the_idle_timeout_are_closed():
    packets = _packets()
    last = packets[-1][0]
    seen = {}

    def on_tick(now):
        seen["routes"] = len(run.session.routes)

    run = DecodeRun(ListSource(packets[:-40] + [(last + 1000, TICK, b"", 0)]), idle_timeout=10.0, on_tick=on_tick)
    records = list(run.records())
    assert seen["routes"] == 0
    assert run.kafka_connections > 0
    # what was still waiting when they went idle is reported, not lost
    assert any(r["type"] == "exchange" and r["response"] is None for r in records)
