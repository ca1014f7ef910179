"""kinspect sniff --write with rotation against real clients on loopback (issue 37).

A Tansu broker on lo, librdkafka producing and consuming while sniff rotates its --write files
every 20 KiB and keeps 2: the files rotate, only the newest 2 remain (nothing else, no hidden file
left), tshark reads each, and decode of the two in order (one capture: the pcapng files one after
the other) gives every exchange sniff showed live from the first kept packet on, line for line.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.integration.test_sniff_lab import Sniff, _json_lines
from tests.lab.kinspect_child import KINSPECT, REPO
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.runner import run_client
from tests.lab.tansu import TansuBroker

pytestmark = pytest.mark.lab

ROTATE_MB = "0.02"  # 20 KiB: the clients below fill several files


@pytest.fixture(scope="module")
def broker():
    require_lab_host()
    with TansuBroker() as b:
        yield b


def _first_time(path) -> float:
    out = subprocess.run(["tshark", "-r", str(path), "-c", "1", "-T", "fields", "-e", "frame.time_epoch"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return float(out.stdout.split()[0])


def test_sniff_rotates_its_files_keeps_the_newest_two_and_they_decode_as_captured(broker, tmp_path):
    ring = tmp_path / "ring"
    ring.mkdir()
    sniff = Sniff(["lo", "--backend", "ring", "--port", str(broker.port), "--filter", f"tcp port {broker.port}",
                   "--json", "--write", str(ring / "cap.pcapng"), "--rotate-mb", ROTATE_MB, "--keep", "2"]).start()
    produced = []
    for label in ("rot-a", "rot-b"):
        manifest = run_client("librdkafka_client", ["--bootstrap", broker.bootstrap, "--codecs", "none",
                                                    "--count", "40", "--value-size", "500", "--label", label])
        produced += [p["value"] for p in manifest["produced"]]
    code, out = sniff.stop()
    assert code == 0, sniff.stderr
    m = next((re.search(r"--write: (\d+) files written by rotation; kept 2", line) for line in sniff.stderr
              if "files written by rotation" in line), None)
    assert m, sniff.stderr
    written = int(m.group(1))
    assert written >= 4  # it rotated
    kept = sorted(p.name for p in ring.iterdir())
    assert kept == [f"cap_{n:05d}.pcapng" for n in (written - 1, written)]  # nothing hidden left either
    files = [ring / name for name in kept]
    assert files[0].stat().st_size >= float(ROTATE_MB) * (1 << 20)
    for f in files:  # a whole pcapng, as tshark reads it
        check = subprocess.run(["tshark", "-r", str(f)], capture_output=True, text=True, timeout=60)
        assert check.returncode == 0 and check.stdout.strip() and "cut short" not in check.stderr, check.stderr

    live = [r for r in _json_lines(out) if r["type"] == "exchange"]
    assert set(produced) and all(v in out for v in produced)  # sniff saw every value sent
    start = _first_time(files[0])
    window = {(r["conn"], r["correlation_id"]): r for r in live if r["request_time"] >= start}
    both = b"".join(f.read_bytes() for f in files)
    decoded = subprocess.run([*KINSPECT, "decode", "--json", "-j1", "--port", str(broker.port), "-"], input=both,
                             cwd=REPO, capture_output=True, timeout=120)
    assert decoded.returncode == 0, decoded.stderr
    exchanges = [r for r in _json_lines(decoded.stdout.decode()) if r["type"] == "exchange"]
    keys = [(r["conn"], r["correlation_id"]) for r in exchanges]
    assert len(set(keys)) == len(keys) and set(keys) <= set(window)  # each once, none made up
    # no packet lost or added between the files: frame numbers are the live ones, shifted by those deleted
    shifts = {window[r["conn"], r["correlation_id"]]["request_frames"][0] - r["request_frames"][0] for r in exchanges}
    assert len(shifts) == 1
    shift = shifts.pop()
    assert shift > 0
    opened = _opened(files)
    cut = [r for r in exchanges if _client_port(r) not in opened]
    whole = [r for r in exchanges if _client_port(r) in opened]
    for r in exchanges:
        for frames in ("request_frames", "response_frames"):
            if r.get(frames) is not None:
                r[frames] = [n + shift for n in r[frames]]
    assert [(r["conn"], r["correlation_id"]) for r in whole] == \
        [key for key in window if _client_port(window[key]) in opened]  # in order, none missing
    for r in whole:  # connections opened in the window: exactly what sniff showed live
        assert json.dumps(r, sort_keys=True) == json.dumps(window[r["conn"], r["correlation_id"]], sort_keys=True)
    for r in cut:  # picked up mid-way: frames are found again (README), an exchange cut there may be lost
        seen = window[r["conn"], r["correlation_id"]]
        assert r["request"] == seen["request"] and (r["response"] is None or r == seen)
    assert len(window) < len(live) and any(value in json.dumps(whole) for value in produced)  # values in it


def _client_port(record) -> int:
    return int(record["conn"].split("-")[0].rsplit(":", 1)[1])


def _opened(files) -> set[int]:
    """The client ports of the connections whose SYN is in ``files``."""
    ports = set()
    for f in files:
        out = subprocess.run(["tshark", "-r", str(f), "-Y", "tcp.flags.syn == 1 && tcp.flags.ack == 0", "-T", "fields",
                              "-e", "tcp.srcport"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        ports |= {int(p) for p in out.stdout.split()}
    return ports
