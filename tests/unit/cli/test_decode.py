"""kinspect decode from the command line: output modes, filters, exit codes, bad input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kinspect.cli import cli
from tests.conftest import PCAPS

DEMO = PCAPS / "librdkafka-produce-consume.pcapng"


def run(*args, input=None):
    result = CliRunner().invoke(cli, ["decode", *map(str, args)], input=input)
    return result


def json_lines(text: str) -> list[dict]:
    lines = [json.loads(line) for line in text.splitlines()]
    assert all(isinstance(obj, dict) for obj in lines)
    return lines


def test_json_lines_follow_the_contract():
    result = run("--json", DEMO)
    assert result.exit_code == 0, result.output
    records = json_lines(result.stdout)
    exchanges = [r for r in records if r["type"] == "exchange"]
    assert len(exchanges) > 50
    required = {"conn", "api_key", "api_name", "api_version", "correlation_id", "client_id", "request_time",
                "response_time", "latency_ms", "request", "response", "error_codes", "problems"}
    for r in exchanges:
        assert required <= set(r)
        if r["response"] is not None:
            assert r["latency_ms"] >= 0
    produced = [rec["value"] for r in exchanges if r["api_name"] == "Produce"
                for topic in r["request"]["topic_data"] for part in topic["partition_data"]
                for batch in part["records"] for rec in batch["records"]]
    assert produced and all(isinstance(v, str) for v in produced)


def test_text_mode_one_line_per_exchange():
    result = run(DEMO)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert any("Produce v10" in line and "librdkafka-producer-gzip" in line for line in lines)
    assert "\x1b[" not in result.stdout  # plain text when not a terminal


@pytest.mark.parametrize("make", ["demo", "escapes", "non-utf8", "half-open"])
@pytest.mark.parametrize("verbose", [False, True])
def test_piped_text_is_what_rich_prints_without_a_terminal(tmp_path, make, verbose):
    """Piped, decode writes its lines itself (rich's print cost ~100 µs a line): the same bytes."""
    import io

    from kinspect.cli.output import Output
    from kinspect.decode.pipeline import DecodeRun
    from kinspect.render.text import exchange_line, problem_lines, tree_lines
    from tests.hostile import inputs

    path = {"demo": lambda: DEMO, "escapes": lambda: inputs.escapes_capture(tmp_path),
            "non-utf8": lambda: inputs.non_utf8_strings_capture(tmp_path),
            "half-open": lambda: inputs.half_open_partial(tmp_path, count=30)}[make]()
    rich = Output(False, io.StringIO())
    assert not rich.interactive
    for record in DecodeRun(str(path)).records():  # each line through rich, as decode did
        rich.text(exchange_line(record))
        for line in problem_lines(record):
            rich.text(line)
        if verbose and record["type"] == "exchange":
            for side in ("request", "response"):
                if record[side] is not None:
                    rich.text(f"  {side}:")
                    for line in tree_lines(record[side]):
                        rich.text(line)
    result = run(*(["-v"] if verbose else []), path)
    assert result.stdout == rich.stream.getvalue() and result.stdout.count("\n") >= 2


def test_filters():
    produce = json_lines(run("--json", "--api", "produce", DEMO).stdout)
    assert produce and {r["api_name"] for r in produce} == {"Produce"}
    by_key = json_lines(run("--json", "--api", "0", DEMO).stdout)
    assert len(by_key) == len(produce)
    clients = json_lines(run("--json", "--client-id", "*-zstd", DEMO).stdout)
    assert clients and all(r["client_id"].endswith("-zstd") for r in clients)
    slow = json_lines(run("--json", "--min-latency-ms", "100", DEMO).stdout)
    assert slow and all(r["latency_ms"] >= 100 for r in slow)
    errors = json_lines(run("--json", "--errors", DEMO).stdout)
    assert errors and all(r["error_codes"] or r["problems"] for r in errors if r["type"] == "exchange")
    topic = json_lines(run("--json", "--topic", "lab-librdkafka", "--api", "Fetch", DEMO).stdout)
    assert topic and {r["api_name"] for r in topic} == {"Fetch"}
    assert json_lines(run("--json", "--topic", "no-such-topic", DEMO).stdout) == []


def test_conn_and_correlation_id_pick_exchanges():
    """Checked against the unfiltered output: the same exchanges, none missing, none extra."""
    every = [r for r in json_lines(run("--json", DEMO).stdout) if r["type"] == "exchange"]
    conn = every[5]["conn"]
    client, broker = conn.split("-")
    for pattern in (conn, client, ":" + client.rsplit(":", 1)[1], conn.split(":")[0][:5] + "*-*"):
        picked = [r for r in json_lines(run("--json", "--conn", pattern, DEMO).stdout)]
        expected = [r for r in every if r["conn"] == conn or (pattern.endswith("*-*"))]
        assert [(r["conn"], r["correlation_id"]) for r in picked if r["type"] == "exchange"] == \
            [(r["conn"], r["correlation_id"]) for r in expected], pattern
    one = json_lines(run("--json", "--conn", conn, "--correlation-id", every[5]["correlation_id"], DEMO).stdout)
    assert one == [every[5]]
    by_id = json_lines(run("--json", "--correlation-id", "2", "--correlation-id", "3", DEMO).stdout)
    assert by_id == [r for r in every if r["correlation_id"] in (2, 3)] and by_id


@pytest.mark.parametrize("mode", [[], ["--json"], ["--summary", "--json"], ["-v"]])
def test_count_stops_after_n_exchanges(mode):
    every = json_lines(run("--json", "--api", "Produce", DEMO).stdout)
    result = run(*mode, "-c", "3", "--api", "Produce", DEMO)
    assert result.exit_code == 0, result.output
    if mode == ["--json"]:
        assert json_lines(result.stdout) == every[:3]
    elif mode == ["--summary", "--json"]:
        rows = [r for r in json_lines(result.stdout) if r.get("api_name") == "Produce"]
        assert rows[0]["count"] == 3
    else:
        assert result.stdout.count(" Produce v") == 3


def test_a_filter_that_matches_nothing_says_so():
    for mode in ([], ["--json"]):
        result = run(*mode, "--api", "Fetch", "--topic", "no-such-topic", DEMO)
        assert result.exit_code == 0 and result.stdout == ""
        assert "no exchange matched the filters (--api Fetch --topic no-such-topic)" in result.stderr
    assert "matched" not in run("--api", "Fetch", DEMO).stderr


def test_unknown_api_is_a_usage_error():
    result = run("--api", "Bogus", DEMO)
    assert result.exit_code == 2
    assert "unknown API" in result.output


def test_summary_json_and_text():
    rows = json_lines(run("--summary", "--json", DEMO).stdout)
    by_api = {r["api_name"]: r for r in rows if r["type"] == "summary"}
    assert by_api["Produce"]["count"] == 15 and by_api["Produce"]["latency_p99_ms"] is not None
    assert any(r["type"] == "summary_error" and r["error"] == "MEMBER_ID_REQUIRED" for r in rows)
    text = run("--summary", DEMO).stdout
    assert "Exchanges by API" in text and "Produce" in text


def test_gzip_and_stdin(tmp_path):
    gz = tmp_path / "demo.pcapng.gz"
    gz.write_bytes(gzip.compress(DEMO.read_bytes()))
    plain = json_lines(run("--json", DEMO).stdout)
    assert json_lines(run("--json", gz).stdout) == plain
    piped = subprocess.run([sys.executable, "-m", "kinspect", "decode", "--json", "-"],
                           input=DEMO.read_bytes(), capture_output=True, check=True)
    assert json_lines(piped.stdout.decode()) == plain


@pytest.mark.parametrize("content, code, message", [
    (b"", 3, "empty"),
    (b"GET / HTTP/1.1\r\n\r\n", 3, "not a pcap or pcapng"),
    (b"\x1f\x8bnot really gzip", 3, ""),
])
def test_unreadable_input_exits_3_with_one_line(tmp_path, content, code, message):
    path = tmp_path / "bad.pcap"
    path.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "kinspect", "decode", str(path)], capture_output=True, text=True)
    assert proc.returncode == code
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1


def test_missing_file_exits_3():
    proc = subprocess.run([sys.executable, "-m", "kinspect", "decode", "/nonexistent.pcap"],
                          capture_output=True, text=True)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr


def test_truncated_capture_prints_what_came_before_and_exits_1(tmp_path):
    data = DEMO.read_bytes()
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(data[: len(data) // 2])
    whole = json_lines(run("--json", DEMO).stdout)
    proc = subprocess.run([sys.executable, "-m", "kinspect", "decode", "--json", str(cut)], capture_output=True,
                          text=True)
    assert proc.returncode == 1
    partial = json_lines(proc.stdout)
    assert 0 < len([r for r in partial if r["type"] == "exchange"]) < len(whole)
    assert any(r["type"] == "notice" and r["kind"] == "capture" and r["offset"] for r in partial)
    assert "truncated" in proc.stderr


def test_no_kafka_in_capture_exits_1(tmp_path):
    # The arkime capture's Kafka, announced on a port it doesn't use, with heuristics off.
    from tests.conftest import REALDATA
    result = run("--no-heuristic", REALDATA / "go-sniffer/kafka.pcap")
    assert result.exit_code == 0  # 9092 is always a Kafka port
    other = subprocess.run(["editcap", "-r", str(DEMO), str(tmp_path / "syn.pcapng"), "1-3"], capture_output=True)
    assert other.returncode == 0
    proc = subprocess.run([sys.executable, "-m", "kinspect", "decode", str(tmp_path / "syn.pcapng")],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "no Kafka traffic found" in proc.stderr


def test_help_shows_examples():
    result = CliRunner().invoke(cli, ["decode", "--help"])
    assert result.exit_code == 0 and "Examples:" in result.output and "kinspect decode" in result.output


def copies_of(capture, copies: int) -> bytes:
    """A classic Ethernet pcap repeated ``copies`` times, each copy's IPv4 addresses changed so that
    its connections are new ones: a capture big enough to take seconds, from real traffic."""
    import struct
    data = capture.read_bytes()
    frames, pos = [], 24
    while pos + 16 <= len(data):
        sec, usec, caplen, origlen = struct.unpack_from("<IIII", data, pos)
        frames.append((sec, usec, origlen, data[pos + 16: pos + 16 + caplen]))
        pos += 16 + caplen
    out = [data[:24]]
    for k in range(copies):
        for sec, usec, origlen, frame in frames:
            frame = bytearray(frame)
            if frame[12:14] == b"\x08\x00":  # IPv4: the second and third bytes of both addresses
                frame[27:29] = frame[31:33] = bytes((k % 256, k // 256))
            out.append(struct.pack("<IIII", sec + 10 * k, usec, len(frame), origlen) + bytes(frame))
    return b"".join(out)


@pytest.mark.parametrize("mode", ["--json", "--summary"])
def test_a_killed_worker_ends_the_run_with_exit_4_and_says_so(tmp_path, mode):
    import os
    import signal
    import time
    big = tmp_path / "big.pcap"
    big.write_bytes(copies_of(PCAPS / "kafka41-librdkafka-mtu1500.pcap", 400))  # 20 MB, seconds
    out = tmp_path / "out.jsonl"
    with out.open("wb") as stdout:
        proc = subprocess.Popen([sys.executable, "-m", "kinspect", "decode", mode, "-j2", str(big)],
                                stdout=stdout, stderr=subprocess.PIPE, text=True)
        children = f"/proc/{proc.pid}/task/{proc.pid}/children"
        started = time.monotonic()
        workers: list[str] = []
        while len(workers) < 2 or (mode == "--json" and out.stat().st_size == 0):
            assert proc.poll() is None and time.monotonic() - started < 60, "no workers seen"
            time.sleep(0.01)
            workers = open(children).read().split()
        os.kill(int(workers[0]), signal.SIGKILL)
        try:
            _, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("kinspect still runs a minute after its worker was killed")
    assert proc.returncode == 4
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert (f"a decoding worker process (pid {workers[0]}) died: killed by signal 9, SIGKILL "
            f"(out of memory?)") in stderr and "re-run with -j1" in stderr
    if mode == "--json":
        written = out.read_bytes()
        assert written.endswith(b"\n") and all(json.loads(line) for line in written.splitlines())


def test_lines_not_understood_in_a_decryption_secrets_block_are_said_once(tmp_path):
    """A pcapng's Decryption Secrets Block is a key log too: its bad lines are counted and named
    once after the capture (they were counted and never said)."""
    from tests.hostile.inputs_tls import junk_dsb_pcapng_gz

    capture = junk_dsb_pcapng_gz(tmp_path, size=1 << 20)
    result = subprocess.run([sys.executable, "-m", "kinspect", "decode", capture], capture_output=True, text=True)
    said = [line for line in result.stderr.splitlines() if "key-log lines not understood" in line]
    assert len(said) == 1 and said[0].startswith(f"kinspect: {capture}: ")
    assert "pcapng decryption secrets block:1" in said[0]


@pytest.mark.parametrize("jobs", ["-j1", "-j2"])
def test_several_captures_name_each_records_capture(jobs):
    other = PCAPS / "java-console-producer.pcap"
    both = json_lines(run("--json", jobs, DEMO, other).stdout)
    alone = [json_lines(run("--json", jobs, path).stdout) for path in (DEMO, other)]
    assert [{k: v for k, v in r.items() if k != "capture"} for r in both] == alone[0] + alone[1]
    assert [r["capture"] for r in both] == [str(DEMO)] * len(alone[0]) + [str(other)] * len(alone[1])
    assert not any("capture" in r for r in alone[0] + alone[1])
    lines = run(DEMO, other).stdout.splitlines()
    assert lines[0].startswith(f"{DEMO}  ") and lines[-1].startswith(f"{other}  ")
