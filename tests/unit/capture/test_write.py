"""sniff --write: the pcapng it keeps decodes as what was captured; its interface statistics
blocks (dumpcap's drop counts) are read back."""

import struct

from kinspect.capture.pcapng import PcapngParser
from kinspect.capture.source import open_capture
from kinspect.capture.stream import TICK
from kinspect.capture.write import Recording, _block, interface_description, section_header
from kinspect.decode.pipeline import DecodeRun
from kinspect.render.jsonl import dumps
from tests.conftest import PCAPS
from tests.unit.decode.test_pipeline_seam import ListSource

CAPTURE = PCAPS / "librdkafka-mtu1500.pcap"


def test_the_written_file_holds_every_packet_and_decodes_identically(tmp_path):
    with open_capture(str(CAPTURE)) as capture:
        packets = [(ts, lt, bytes(data), n) for ts, lt, data, n in capture.packets()]
    source = ListSource(packets[:5] + [(packets[5][0], TICK, b"", 0)] + packets[5:])
    out = tmp_path / "kept.pcapng"
    recording = Recording(source, open(out, "wb"))
    assert list(recording.packets()) == source.items
    recording.close()
    assert recording.written == len(packets)
    with open_capture(str(out)) as capture:
        again = [(round(ts, 6), lt, bytes(data)) for ts, lt, data, _ in capture.packets()]
        assert capture.problems == []
    assert again == [(round(ts, 6), lt, data) for ts, lt, data, _ in packets]
    decoded = [dumps(r) for r in DecodeRun(str(out)).records()]
    assert decoded == [dumps(r) for r in DecodeRun(str(CAPTURE)).records()]


def test_interface_statistics_blocks_give_the_drop_counters():
    options = b"".join(struct.pack("<HHQ", code, 8, value) for code, value in ((4, 1000), (5, 7), (7, 2)))
    isb = _block(5, struct.pack("<III", 0, 0, 0) + options + b"\0\0\0\0")
    parser = PcapngParser([])
    parser.feed(section_header() + interface_description(101) + isb)
    assert list(parser.packets(final=True)) == []
    assert parser.statistics == {0: {"ifrecv": 1000, "ifdrop": 7, "osdrop": 2}}
