"""kinspect report's command line: usage, unreadable inputs, outputs that must not be written."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

CAPTURE = REPO / "pcaps" / "librdkafka-produce-consume.pcapng"
SAMPLE_LOGS = REPO / "samples" / "kafka-4.1.2" / "logs"


def kinspect(*args, cwd=REPO) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "kinspect", "report", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_capture_gives_one_self_contained_page(tmp_path):
    page = tmp_path / "r.html"
    done = kinspect(CAPTURE, "-o", page)
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "default-src 'none'" in html
    assert "<script src" not in html and "<link" not in html
    assert done.stderr.startswith(f"kinspect: wrote {page} (")


def test_no_input_or_no_output_is_a_usage_error(tmp_path):
    done = kinspect("-o", tmp_path / "r.html")
    assert done.returncode == 2 and "give a capture, --log-dir DIR, or both" in done.stderr
    done = kinspect(CAPTURE)
    assert done.returncode == 2 and "--output" in done.stderr
    done = kinspect("--keylog", CAPTURE, "--log-dir", SAMPLE_LOGS, "-o", tmp_path / "r.html")
    assert done.returncode == 2 and "--keylog goes with a capture" in done.stderr
    assert not (tmp_path / "r.html").exists()


def test_an_unreadable_log_dir_or_capture_is_exit_3_in_one_line(tmp_path):
    done = kinspect("--log-dir", tmp_path / "missing", "-o", tmp_path / "r.html")
    assert done.returncode == 3 and len(done.stderr.splitlines()) == 1 and "not a directory" in done.stderr
    (tmp_path / "empty").mkdir()
    done = kinspect("--log-dir", tmp_path / "empty", "-o", tmp_path / "r.html")
    assert done.returncode == 3 and "no partition directories" in done.stderr
    done = kinspect(tmp_path / "missing.pcap", "-o", tmp_path / "r.html")
    assert done.returncode == 3
    assert not (tmp_path / "r.html").exists()


def test_the_output_is_never_an_input_nor_a_link(tmp_path):
    capture = tmp_path / "c.pcapng"
    capture.write_bytes(CAPTURE.read_bytes())
    done = kinspect(capture, "-o", capture)
    assert done.returncode == 2 and capture.read_bytes() == CAPTURE.read_bytes()
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    os.symlink(target, tmp_path / "link.html")
    done = kinspect(CAPTURE, "-o", tmp_path / "link.html")
    assert done.returncode == 2 and target.read_text() == "keep"


def test_a_capture_without_kafka_is_exit_1_and_the_page_is_still_written(tmp_path):
    from scapy.all import IP, UDP, Ether, wrpcap

    capture = tmp_path / "udp.pcap"
    wrpcap(str(capture), [Ether() / IP(dst="10.0.0.1") / UDP(dport=53) / b"x" * 20 for _ in range(3)])
    page = tmp_path / "r.html"
    done = kinspect(capture, "-o", page)
    assert done.returncode == 1 and page.exists()
    assert "No findings." in page.read_text()
