"""kinspect doctor and kinspect clients as a user runs them: exit codes, JSON Lines, the text
report, --help, bounds, and the evidence a finding names found again with decode."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import PCAPS, REPO, SAMPLES

SCENARIO = REPO / "tests" / "data" / "doctor-scenario"
CAPTURE = SCENARIO / "doctor-scenario.pcap"


def kinspect(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done


def test_healthy_traffic_exits_0_and_findings_exit_1():
    healthy = kinspect("doctor", PCAPS / "librdkafka-produce-consume.pcapng")
    assert healthy.returncode == 0, healthy.stderr
    assert kinspect("doctor", CAPTURE).returncode == 1


def test_usage_and_unreadable_inputs():
    assert kinspect("doctor").returncode == 2
    assert kinspect("doctor", "--keylog", CAPTURE, "--log-dir", SAMPLES / "kafka-4.1.2" / "logs").returncode == 2
    missing = kinspect("doctor", REPO / "no-such.pcap")
    assert missing.returncode == 3 and "no-such.pcap" in missing.stderr
    not_dir = kinspect("doctor", "--log-dir", CAPTURE)
    assert not_dir.returncode == 3 and "not a directory" in not_dir.stderr
    assert kinspect("clients").returncode == 2


def test_json_lines_follow_the_finding_contract():
    done = kinspect("doctor", "--json", CAPTURE, "--log-dir", SCENARIO / "logs")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines and {line["type"] for line in lines} == {"finding"}
    for line in lines:
        assert list(line)[:4] == ["type", "check", "severity", "summary"] and list(line)[-1] == "evidence"
        assert line["severity"] in ("error", "warning", "info") and isinstance(line["evidence"], list)
        assert all(set(e) >= {"conn", "correlation_id", "time"} for e in line["evidence"])
    sources = {line.get("source") for line in lines if line["check"] == "hanging_transaction"}
    assert sources == {"capture", "log_dir"}
    ranks = [("error", "warning", "info").index(line["severity"]) for line in lines]
    assert ranks == sorted(ranks)


def test_evidence_leads_back_to_the_exchange_with_decode():
    done = kinspect("doctor", "--json", "--check", "throttle", CAPTURE)
    [throttle] = [json.loads(line) for line in done.stdout.splitlines()]
    seen = throttle["evidence"][0]
    found = kinspect("decode", "--json", "--conn", seen["conn"], "--correlation-id", seen["correlation_id"], CAPTURE)
    [exchange] = [json.loads(line) for line in found.stdout.splitlines() if '"exchange"' in line]
    assert exchange["request_time"] == seen["time"]
    assert exchange["response"]["throttle_time_ms"] == throttle["max_throttle_ms"]


def test_the_text_report_piped_is_plain_and_grouped_by_severity():
    done = kinspect("doctor", CAPTURE, "--log-dir", SCENARIO / "logs")
    text = done.stdout
    assert "\x1b[" not in text
    assert text.index("Warnings (") < text.index("Info (")
    assert "[lag] group stalled-app is" in text and "evidence: " in text
    assert "kinspect decode --port " in text and "--conn 127.0.0.1:" in text and "--correlation-id" in text
    assert text.rstrip().endswith("exchanges and log dir " + str(SCENARIO / "logs") + ".")


def test_thresholds_are_options():
    quiet = kinspect("doctor", "--json", "--check", "lag", "--max-lag", "100000", "--max-lag-seconds", "1000", CAPTURE)
    assert quiet.returncode == 0 and quiet.stdout == ""
    series = kinspect("doctor", "--json", "--check", "lag", "--series", "--max-lag", "100000",
                      "--max-lag-seconds", "1000", CAPTURE)
    rows = [json.loads(line) for line in series.stdout.splitlines()]
    assert {r["type"] for r in rows} == {"lag_series"} and {r["group"] for r in rows} >= {"stalled-app", "healthy-app"}
    assert all(r["series"] for r in rows)


def test_state_past_the_bound_is_dropped_with_a_notice():
    done = kinspect("doctor", "--json", "--max-state", "2", CAPTURE)
    notices = [json.loads(line) for line in done.stdout.splitlines() if '"notice"' in line]
    assert notices and all(n["kind"] == "bound" and n["dropped"] > 0 and n["limit"] == 2 for n in notices)
    text = kinspect("doctor", "--max-state", "2", CAPTURE)
    assert "dropped past the 2 kept" in text.stderr


def test_help_has_examples_and_exit_codes():
    for command in ("doctor", "clients"):
        done = kinspect(command, "--help")
        assert done.returncode == 0 and "Examples:" in done.stdout and "Exit codes:" in done.stdout
    listed = kinspect("--help").stdout
    assert "doctor" in listed and "clients" in listed


def test_clients_table_and_json_rows():
    table = kinspect("clients", CAPTURE)
    assert table.returncode == 0
    assert "legacy-producer" in table.stdout and "NOT READY: Produce v2" in table.stdout
    assert "txn-marker-sender" not in table.stdout
    everyone = kinspect("clients", "--json", "--all", PCAPS / "java-transactions.pcap")
    rows = [json.loads(line) for line in everyone.stdout.splitlines()]
    assert {r["client_id"] for r in rows if r["internal"]} == {"broker-1-txn-marker-sender",
                                                               "AddPartitionsManager-client-1"}
