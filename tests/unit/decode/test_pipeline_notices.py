"""Output stays proportionate to the input: repeated notices of one kind on one connection fold
into a count, and so do the counts of connections closed at once (issue 30, item 7)."""

from pathlib import Path

from kinspect.decode.pipeline import NOTICES_AT_ONCE, DecodeRun
from kinspect.decode.summary import Summary
from kinspect.wire.exchange import NOTICES_SHOWN
from tests.hostile.packets import ACK, PSH, Connection, PcapWriter


def _zeros(path: Path, connections: int, size: int, close: bool = True) -> Path:
    """``connections`` connections on port 9092, each sending ``size`` zero bytes after a real
    handshake: a frame of size 0 every 4 bytes."""
    with PcapWriter(path) as out:
        for i in range(connections):
            conn = Connection(out, sport=40000 + i)
            conn.handshake()
            for at in range(0, size, 65000):
                chunk = bytes(min(65000, size - at))
                conn.client_segment(0, chunk, ACK | PSH)
                conn.client_seq += len(chunk)
            if close:
                conn.close()
    return path


def test_a_megabyte_of_zeros_on_port_9092_gives_eleven_notices_that_count_every_frame(tmp_path):
    records = list(DecodeRun(_zeros(tmp_path / "zeros.pcap", 1, 1 << 20)).records())
    assert [r["kind"] for r in records] == ["undecodable"] * (NOTICES_SHOWN + 1)
    assert records[-1]["more"] == (1 << 18) - NOTICES_SHOWN
    totals = Summary()
    for record in records:
        totals.add(record)
    assert totals.notices == {"undecodable": 1 << 18}


def test_counts_of_connections_still_open_at_the_end_are_summed_not_counted_as_one(tmp_path):
    """20 connections each show 10 notices and, at the capture's end, one counting their other 40:
    of those 20 counts, 10 are shown and one more stands for the other 10 (400 notices)."""
    records = list(DecodeRun(_zeros(tmp_path / "open.pcap", 20, 200, close=False)).records())
    counts = [r for r in records if "more" in r]
    assert len(records) == 20 * NOTICES_SHOWN + NOTICES_AT_ONCE + 1
    assert [r["more"] for r in counts] == [40] * NOTICES_AT_ONCE + [400]
    assert counts[-1]["conn"] == "" and counts[-1]["what"].startswith(
        "400 more undecodable notices like the ones above, of connections still open when the capture "
        "ended (800 in all; the first 10 are shown)")
    totals = Summary()
    for record in records:
        totals.add(record)
    assert totals.notices == {"undecodable": 20 * 50}


def test_live_figures_count_a_folded_notice_as_all_it_stands_for(tmp_path):
    from kinspect.live.stats import LiveStats

    stats = LiveStats()
    for record in DecodeRun(_zeros(tmp_path / "zeros.pcap", 1, 4000)).records():
        stats.add(record)
    assert stats.notices == {"undecodable": 1000}
