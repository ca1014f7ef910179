"""capture/live.py without capturing: the child's command lines and dumpcap's closing line."""

from kinspect.capture.live import DUMPCAP_DROPS, PipeSource


def test_dumpcap_writes_pcap_for_one_interface_and_pcapng_for_several():
    one = PipeSource._argv("dumpcap", ["lo"], "tcp", 32)
    two = PipeSource._argv("dumpcap", ["lo", "eth0"], "tcp", 32)
    assert one[:2] == ["dumpcap", "-P"] and one[-2:] == ["-w", "-"]
    assert two[:2] == ["dumpcap", "-n"] and two.count("-i") == 2


def test_dumpcap_closing_line_gives_received_and_dropped_whatever_the_interface_name():
    # as dumpcap 4.0.17 prints it (its display name holds a colon)
    line = ("Packets received/dropped on interface 'Loopback: lo': 5460/229080 "
            "(pcap:229080/dumpcap:0/flushed:0/ps_ifdrop:0) (2.3%)")
    m = DUMPCAP_DROPS.search(line)
    assert (m.group(1), m.group(3), m.group(4)) == ("Loopback: lo", "5460", "229080")
    m = DUMPCAP_DROPS.search("Packets received/dropped on interface eth0: 10/2 (pcap:2/dumpcap:0)")
    assert (m.group(2), m.group(3), m.group(4)) == ("eth0", "10", "2")
