"""kinspect doctor, clients and offsets on the lab scenario (tests/lab/doctor_scenario.py): real
clients against Apache Kafka 3.9.2, each problem at a known moment, checked against the oracles
recorded beside the capture (kafka-consumer-groups --describe, tshark's generation ids,
kafka-transactions, librdkafka's own throttle statistics).

The committed recording (tests/data/doctor-scenario) runs everywhere; the lab test records the
scenario afresh (about 90 s, root for tcpdump) and checks it the same way."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO

SCENARIO = REPO / "tests" / "data" / "doctor-scenario"
HEALTHY = ("healthy-app", "healthy-producer", "healthy-consumer", "events")


def kinspect(*args: str, check_exit: int | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "kinspect", *args], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert "Traceback" not in done.stderr, done.stderr
    if check_exit is not None:
        assert done.returncode == check_exit, done.stderr
    return done


def _lines(done) -> list[dict]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def _table(text: str) -> dict:
    """kafka-transactions' tab-separated table: the first row's cells by header."""
    header, *rows = [[cell.strip() for cell in line.split("\t")] for line in text.strip().splitlines()]
    return dict(zip(header, rows[0])) if rows else {}


def check_capture(directory: Path) -> None:
    manifest = json.loads((directory / "manifest.json").read_text())
    oracles, clients = manifest["oracles"], manifest["clients"]
    # --port: the broker's own marker sender connected before the recording started, and without
    # its SYN only the port says which side is the broker
    done = kinspect("doctor", "--json", "--port", str(manifest["port"]), str(directory / manifest["capture"]),
                    check_exit=1)
    findings = [f for f in _lines(done) if f["type"] == "finding"]
    by_check: dict[str, list] = {}
    for found in findings:
        by_check.setdefault(found["check"], []).append(found)

    # the healthy group and producer raise nothing
    for found in findings:
        assert not any(name in json.dumps(found) for name in HEALTHY), found

    # rebalances: tshark's generation ids of the group's JoinGroup responses
    [rebalance] = by_check["rebalance"]
    generations = oracles["generation_ids"]
    assert rebalance["group"] == "rebalance-app" and rebalance["severity"] == "warning"
    assert rebalance["generation"] == max(generations)
    assert rebalance["rebalances"] == len(generations) - 1
    assert rebalance["timed_out"] == 1 and rebalance["members"] == 1
    reasons = [r["reason"] for r in rebalance["reasons"]]
    assert sum(r.startswith("member member-b-") and r.endswith("left (LeaveGroup)") for r in reasons) == 1
    assert sum(r.startswith("member member-c-") and "timed out (no LeaveGroup" in r for r in reasons) == 1
    assert sum(r.endswith("joined") for r in reasons) == 2
    assert 0 < rebalance["pause_ms"] < 60_000

    # lag: kafka-consumer-groups --describe, run after the recording
    [lag] = by_check["lag"]
    [row] = oracles["consumer_groups"]["stalled-app"]
    assert (lag["group"], lag["topic"], lag["partition"]) == ("stalled-app", "stalled", int(row["PARTITION"]))
    assert lag["committed_offset"] == int(row["CURRENT-OFFSET"])
    assert lag["log_end_offset"] == int(row["LOG-END-OFFSET"])
    assert lag["lag"] == int(row["LAG"])
    stalled_for = clients["stalled-producer"]["events"][-1]["time"] - clients["stalled-app"]["events"][-1]["time"]
    assert 0 < lag["lag_seconds"] <= stalled_for + 1
    assert lag["series"][-1]["lag"] == lag["lag"] and lag["series"][0]["lag"] < lag["lag"]

    # KIP-896: kafka-python pinned to api_version 0.10.1 produced with Produce v2
    [removed] = by_check["removed_api_versions"]
    assert removed["client_id"] == "legacy-producer"
    assert [(a["api_name"], a["versions"]) for a in removed["apis"]] == [("Produce", [2])]

    # throttling: the sum of librdkafka's throttle windows, as the client counted it
    [throttle] = by_check["throttle"]
    stats = clients["throttled-producer"]["events"][-1]["throttle"]
    assert (throttle["client_id"], throttle["api_name"]) == ("throttled-producer", "Produce")
    assert throttle["throttle_ms"] == stats["sum"] and throttle["max_throttle_ms"] == stats["max"]

    # the transaction left open: kafka-transactions describe
    [hanging] = by_check["hanging_transaction"]
    described = _table(oracles["transactions_describe"])
    assert (hanging["transactional_id"], hanging["producer_id"]) == ("doomed-txn", int(described["ProducerId"]))
    assert hanging["partitions"] == described["TopicPartitions"].split(",")
    assert hanging["state"] == "vanished" and hanging["severity"] == "warning"
    assert abs(hanging["open_since"] - int(described["CurrentTransactionStartTimeMs"]) / 1000) < 0.5

    assert set(by_check) <= {"rebalance", "lag", "removed_api_versions", "throttle", "hanging_transaction",
                             "errors", "slow"}
    # on a busy machine the broker itself may stall a second (the committed recording has one:
    # every producer's requests waited 1.2 s at once); what slow names must be that slow
    for found in by_check.get("slow", []):
        for slowest in found["slowest"]:
            again = kinspect("decode", "--json", "--port", str(manifest["port"]), "--conn", slowest["conn"],
                             "--correlation-id", str(slowest["correlation_id"]), str(directory / manifest["capture"]))
            [exchange] = [e for e in _lines(again) if e["type"] == "exchange"]
            assert exchange["latency_ms"] == slowest["latency_ms"] >= 1000
            assert exchange["api_name"] == found["api_name"] and not (exchange["response"] or {}).get("throttle_time_ms")
    assert all(f["severity"] == "info" for f in by_check.get("errors", []))
    for found in findings:
        for seen in found["evidence"]:
            assert seen["conn"].endswith(f":{manifest['port']}") and seen["time"] > 0


def check_log_dir(directory: Path) -> None:
    oracles = json.loads((directory / "manifest.json").read_text())["oracles"]
    done = kinspect("doctor", "--json", "--log-dir", str(directory / "logs"), check_exit=1)
    [found] = [f for f in _lines(done) if f["type"] == "finding"]
    described, producers = _table(oracles["transactions_describe"]), _table(oracles["describe_producers"])
    assert found["check"] == "hanging_transaction" and found["source"] == "log_dir"
    assert (found["transactional_id"], found["producer_id"]) == ("doomed-txn", int(described["ProducerId"]))
    assert found["partitions"] == described["TopicPartitions"].split(",")
    assert found["state"] == "ongoing" and found["coordinator_state"] == described["TransactionState"]
    assert found["open_since"] == int(described["CurrentTransactionStartTimeMs"]) / 1000
    assert found["first_offsets"][0]["offset"] == int(producers["CurrentTransactionStartOffset"])
    assert found["timeout_ms"] == int(described["TransactionTimeoutMs"])
    # kafka-transactions find-hanging agrees that the coordinator still holds it (not KIP-664 hanging)
    assert _table(oracles["find_hanging"]) == {}


def check_offsets(directory: Path) -> None:
    manifest = json.loads((directory / "manifest.json").read_text())
    for group in ("stalled-app", "healthy-app"):
        done = kinspect("offsets", group, "--capture", str(directory / manifest["capture"]), "--json",
                        "--port", str(manifest["port"]), check_exit=0)
        rows = {(r["topic"], r["partition"]): r for r in _lines(done) if r["type"] == "offset"}
        for oracle in manifest["oracles"]["consumer_groups"][group]:
            row = rows[(oracle["TOPIC"], int(oracle["PARTITION"]))]
            assert (row["current_offset"], row["log_end_offset"], row["lag"]) == (
                int(oracle["CURRENT-OFFSET"]), int(oracle["LOG-END-OFFSET"]), int(oracle["LAG"]))


def check_clients(directory: Path) -> None:
    manifest = json.loads((directory / "manifest.json").read_text())
    done = kinspect("clients", "--json", "--port", str(manifest["port"]), str(directory / manifest["capture"]),
                    check_exit=0)
    rows = {r["client_id"]: r for r in _lines(done) if r["type"] == "client"}
    assert rows["legacy-producer"]["kip896_ready"] is False
    assert rows["legacy-producer"]["removed_versions"] == ["Produce v2"]
    assert rows["legacy-producer"]["produced_topics"] == ["legacy"]
    assert rows["healthy-producer"]["software_name"] == "confluent-kafka-python"
    assert rows["healthy-producer"]["kip896_ready"] is True and rows["healthy-producer"]["errors"] == {}
    assert rows["healthy-consumer"]["fetched_topics"] == ["events"]
    assert rows["throttled-producer"]["throttle_ms"] == clients_throttle(manifest)
    assert rows["throttled-producer"]["throttling_honoured"] in (True, False)
    assert all(not r["internal"] for r in rows.values())


def clients_throttle(manifest: dict) -> int:
    return manifest["clients"]["throttled-producer"]["events"][-1]["throttle"]["sum"]


@pytest.mark.parametrize("check", [check_capture, check_log_dir, check_offsets, check_clients],
                         ids=lambda f: f.__name__)
def test_the_committed_scenario(check):
    check(SCENARIO)


@pytest.mark.lab
def test_the_scenario_recorded_afresh(tmp_path):
    from tests.lab.doctor_scenario import record

    record(tmp_path)
    with ThreadPoolExecutor(4) as pool:  # each runs kinspect: at once
        for checked in [pool.submit(check, tmp_path) for check in (check_capture, check_log_dir, check_offsets,
                                                                    check_clients)]:
            checked.result()
