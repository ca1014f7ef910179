"""kafka-dump-log's output, line for line, from dump events (kinspect dump --format kafka).

    formatter = KafkaFormat(deep=True, data=True)
    for event in events:
        for line in formatter.lines(event): print(line)
    for line in formatter.errors(): print(line, file=sys.stderr)

What kafka-dump-log prints to stdout comes from lines(); what it prints to stderr after all
files (index mismatches, time index errors, non-consecutive offsets) from errors(). Internal
topics print as kafka-dump-log's --offsets-decoder, --transaction-log-decoder,
--share-group-state-decoder and --cluster-metadata-decoder do; other keys and values as its
default StringDecoder.
Where kafka-dump-log stops at damage (it reports the rest as invalid bytes, or fails), the
lines go on after the damage with the batches kinspect found.
"""

from __future__ import annotations

import os

from kinspect.records.stream import RecordStream
from kinspect.render import kafka_json
from kinspect.storage.structs import record_structs

DUMPED_KINDS = ("log", "kraft_snapshot", "index", "timeindex", "producer_snapshot", "txnindex")
BOOTSTRAP = "bootstrap.checkpoint"
CONTROL_LABELS = {"SNAPSHOT_HEADER": "SnapshotHeader ", "SNAPSHOT_FOOTER": "SnapshotFooter ",
                  "KRAFT_VERSION": "KRaftVersion ", "KRAFT_VOTERS": "KRaftVoters ",
                  "LEADER_CHANGE": "LeaderChange: "}
CONTROL_IDS = {"ABORT": 0, "COMMIT": 1, "LEADER_CHANGE": 2, "SNAPSHOT_HEADER": 3,
               "SNAPSHOT_FOOTER": 4, "KRAFT_VERSION": 5, "KRAFT_VOTERS": 6}


class KafkaFormat:
    def __init__(self, deep: bool = False, data: bool = False, internal: bool = True):
        self.deep, self.data, self.internal = deep or data, data, internal
        self._current: dict = {}
        self._index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self._time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self._time_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self._time_not_found: dict[str, list[tuple[int, int]]] = {}
        self._non_consecutive: dict[str, list[tuple[int, int]]] = {}
        self._stderr_now: list[str] = []

    # -- per event --------------------------------------------------------------------------

    def lines(self, event: dict) -> list[str]:
        handler = self.HANDLERS.get(event["type"])
        return handler(self, event) if handler is not None else []

    def immediate_errors(self) -> list[str]:
        """stderr lines kafka-dump-log prints as it goes (unknown files, corrupt snapshots)."""
        lines, self._stderr_now = self._stderr_now, []
        return lines

    def errors(self) -> list[str]:
        out = []
        for name, pairs in self._index_mismatches.items():
            out.append(f"Mismatches in :{name}")
            out += [f"  Index offset: {a}, log offset: {b}" for a, b in reversed(pairs)]
        for name, pairs in self._time_mismatches.items():
            out.append(f"Found timestamp mismatch in :{name}")
            out += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in pairs]
        for name, pairs in self._time_out_of_order.items():
            out.append(f"Found out of order timestamp in :{name}")
            out += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in pairs]
        for pairs in self._time_not_found.values():
            out.append("The following indexed offsets are not found in the log.")
            out += [f"Indexed offset: {a}, found log offset: {b}" for a, b in pairs]
        for name, pairs in self._non_consecutive.items():
            out.append(f"Non-consecutive offsets in {name}")
            out += [f"  {a} is followed by {b}" for a, b in reversed(pairs)]
        return out

    def _file(self, event: dict) -> list[str]:
        path = event["file"]
        self._current = {"path": path, "absolute": os.path.abspath(path), "kind": event["kind"],
                      "size": event["size"], "invalid_from": None, "last_offset": -1,
                      "previous_timestamp": -1, "entries": 0}
        out = [f"Dumping {path}"]
        kind = event["kind"]
        if kind not in DUMPED_KINDS:
            self._stderr_now.append(f"Ignoring unknown file {path}")
        elif kind == "log":
            out.append(f"Log starting offset: {event.get('base_offset', 0)}")
        elif kind == "kraft_snapshot":
            if os.path.basename(path) == BOOTSTRAP:
                out.append("KRaft bootstrap snapshot")
            else:
                out.append(f"Snapshot end offset: {event.get('end_offset')}, "
                           f"epoch: {event.get('epoch')}")
        return out

    def _summary(self, event: dict) -> list[str]:
        kind, state = event["kind"], self._current
        if kind in ("log", "kraft_snapshot") and state.get("invalid_from") is not None:
            invalid = state["size"] - state["invalid_from"]
            name = os.path.basename(state["path"])
            return [f"Found {invalid} invalid bytes at the end of {name}"]
        if kind == "index" and state.get("entries") == 0 and state.get("size", 0) < 8:
            return [f"{state['path']} is empty."]
        return []

    # -- segments ---------------------------------------------------------------------------

    def _damage(self, event: dict) -> list[str]:
        if self._current.get("invalid_from") is None:
            self._current["invalid_from"] = event["position"]
        return []

    def _batch(self, event: dict) -> list[str]:
        out = [batch_line(event)]
        records = event.get("records") or ()
        if self.deep and not isinstance(records, RecordStream):  # a stream: record_lines, by chunk
            out += self.record_lines(event, records)
        return out

    def record_lines(self, event: dict, records) -> list[str]:
        out = []
        for record in records:
            self._track_offset(record["offset"])
            out.append(self.record_line(event, record))
        return out

    def _track_offset(self, offset: int) -> None:
        last = self._current["last_offset"]
        if last != -1 and offset != last + 1:
            self._non_consecutive.setdefault(self._current["absolute"], []).append((last, offset))
        self._current["last_offset"] = offset

    def record_line(self, batch: dict, record: dict) -> str:
        line = (f"| offset: {record['offset']} {_timestamp_type(batch)}: {record['timestamp']} "
                f"keySize: {record['key_size']} valueSize: {record['value_size']}")
        if batch["magic"] >= 2:
            keys = ",".join(header["key"] for header in record["headers"])
            line += f" sequence: {record['sequence']} headerKeys: [{keys}]"
        else:
            line += f" isValid: {_bool(record.get('crc_valid'))} crc: {record.get('crc')}}}"
        if batch.get("is_control"):
            line += _control(batch.get("control") or {}, record.get("control_value"))
        elif self.data:
            key, payload = self._key_and_payload(record)
            prefix = " "
            if key is not None:
                line += f"{prefix}key: {key}"
            if payload is not None:
                line += f" payload: {payload}"
        return line

    def _key_and_payload(self, record: dict) -> tuple[str | None, str | None]:
        decoded = record.get("decoded") if self.internal else None
        if decoded is None:
            return _text(record["key"]), _text(record["value"])
        if "record_type" in decoded:
            return _coordinator(decoded, record["offset"])
        return None, _metadata(decoded, record["offset"])

    # -- indexes, snapshots -----------------------------------------------------------------

    def _index_entry(self, event: dict) -> list[str]:
        self._current["entries"] += 1
        found = event.get("batch_last_offset")
        if found is not None and found != event["offset"]:
            self._index_mismatches.setdefault(self._current["absolute"], []).append(
                (event["offset"], found))
        return [f"offset: {event['offset']} position: {event['position']}"]

    def _time_index_entry(self, event: dict) -> list[str]:
        name = self._current["absolute"]
        found = event.get("batch_last_offset")
        if found is None or found != event["offset"]:
            self._time_not_found.setdefault(name, []).append(
                (event["offset"], -1 if found is None else found))
        else:
            if event["batch_max_timestamp"] != event["timestamp"]:
                self._time_mismatches.setdefault(name, []).append(
                    (event["timestamp"], event["batch_max_timestamp"]))
            previous = self._current["previous_timestamp"]
            if previous >= event["timestamp"]:
                self._time_out_of_order.setdefault(name, []).append((event["timestamp"], previous))
        self._current["previous_timestamp"] = event["timestamp"]
        return [f"timestamp: {event['timestamp']} offset: {event['offset']}"]

    def _producer_snapshot(self, event: dict) -> list[str]:
        if event.get("version") != 1:
            self._stderr_now.append(f"Snapshot contained an unknown file version "
                                    f"{event.get('version')}")
        elif not event.get("crc_valid"):
            computed = next((p.get("expected") for p in event.get("problems", ())
                             if p.get("check") == "crc"), None)
            self._stderr_now.append(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: "
                                    f"{event['crc']}. Computed crc: {computed}")
        self._current["bad_snapshot"] = event.get("version") != 1 or not event.get("crc_valid")
        return []

    def _producer(self, event: dict) -> list[str]:
        if self._current.get("bad_snapshot"):
            return []
        first = event["current_txn_first_offset"]
        line = (f"producerId: {event['producer_id']} producerEpoch: {event['producer_epoch']} "
                f"coordinatorEpoch: {event['coordinator_epoch']} currentTxnFirstOffset: "
                f"{'OptionalLong.empty' if first is None else f'OptionalLong[{first}]'} "
                f"lastTimestamp: {event['last_timestamp']} ")
        batch = event.get("batch")
        if batch:
            line += (f"firstSequence: {batch['first_sequence']} lastSequence: "
                     f"{batch['last_sequence']} lastOffset: {batch['last_offset']} offsetDelta: "
                     f"{batch['offset_delta']} timestamp: {batch['timestamp']}")
        return [line]

    def _aborted_txn(self, event: dict) -> list[str]:
        return [f"version: {event['version']} producerId: {event['producer_id']} firstOffset: "
                f"{event['first_offset']} lastOffset: {event['last_offset']} lastStableOffset: "
                f"{event['last_stable_offset']}"]

    HANDLERS = {  # event type → the method giving its lines; other types print nothing
        "file": _file, "summary": _summary, "damage": _damage, "padding": _damage,
        "batch": _batch, "index_entry": _index_entry, "time_index_entry": _time_index_entry,
        "producer_snapshot": _producer_snapshot, "producer": _producer, "aborted_txn": _aborted_txn,
    }


def batch_line(event: dict) -> str:
    if event["magic"] >= 2:
        horizon = event.get("delete_horizon_ms")
        head = (f"baseOffset: {event['base_offset']} lastOffset: {event['last_offset']} count: "
                f"{event['count']} baseSequence: {event['base_sequence']} lastSequence: "
                f"{event['last_sequence']} producerId: {event['producer_id']} producerEpoch: "
                f"{event['producer_epoch']} partitionLeaderEpoch: "
                f"{event['partition_leader_epoch']} isTransactional: "
                f"{_bool(event['is_transactional'])} isControl: {_bool(event['is_control'])} "
                f"deleteHorizonMs: "
                f"{'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'}")
    else:
        head = f"offset: {event['last_offset']}"
    return (f"{head} position: {event['position']} {_timestamp_type(event)}: "
            f"{event['max_timestamp'] if event['max_timestamp'] is not None else -1} size: "
            f"{event['size']} magic: {event['magic']} compresscodec: {event['compression']} "
            f"crc: {event['crc']} isvalid: {_bool(event['crc_valid'])}")


def _timestamp_type(batch: dict) -> str:
    return batch.get("timestamp_type") or "NoTimestampType"


def _bool(value) -> str:
    return "true" if value else "false"


def _text(value: bytes | str | None) -> str | None:
    if value is None or isinstance(value, str):  # text: a redacted secret, "<redacted N bytes>"
        return value
    return kafka_json.java_text(value)


def _control(control: dict, value: dict | None) -> str:
    """value: the record's value decoded as its struct (storage/dump.py's "control_value")."""
    kind = control.get("type")
    if kind in ("ABORT", "COMMIT"):
        return f" endTxnMarker: {kind} coordinatorEpoch: {control.get('coordinator_epoch')}"
    if kind in CONTROL_LABELS and value is not None:
        json = kafka_json.java_json(value["struct"], value["version"], value["data"])
        return f" {CONTROL_LABELS[kind]}{json}"
    raw = kind or "UNKNOWN"
    type_id = raw[8:-1] if raw.startswith("UNKNOWN(") else CONTROL_IDS.get(raw, -1)
    return f" controlType: UNKNOWN({type_id})"


def _coordinator(decoded: dict, offset: int) -> tuple[str | None, str | None]:
    """kafka-dump-log's --offsets-decoder / --transaction-log-decoder key and payload."""
    record_type = decoded["record_type"]
    entry = record_structs(decoded["record_name"], record_type)
    if entry is None or not isinstance(decoded.get("key"), dict):
        if record_type is None:
            return f"Error at offset {offset}, skipping. record key is too short", None
        return f"Unknown record type {record_type} at offset {offset}, skipping.", None
    key_struct, key_version, value_struct = entry
    key = (f'{{"type":"{record_type}","data":'
           f'{kafka_json.java_json(key_struct, key_version, decoded["key"])}}}')
    if decoded["tombstone"]:
        return key, "<DELETE>"
    if not isinstance(decoded.get("value"), dict):
        return (f"Error at offset {offset}, skipping. Unknown version "
                f"{decoded.get('value_version')} of {value_struct}"), None
    nested = {"subscription": "ConsumerProtocolSubscription",
              "assignment": "ConsumerProtocolAssignment"}
    value = kafka_json.java_json(value_struct, decoded["value_version"], decoded["value"], nested)
    return key, f'{{"version":"{decoded["value_version"]}","data":{value}}}'


def _metadata(decoded: dict, offset: int) -> str:
    """kafka-dump-log's --cluster-metadata-decoder payload."""
    if not isinstance(decoded.get("data"), dict) or "record_name" not in decoded:
        return f"Error at {offset}, skipping. Could not decode the metadata record"
    data = kafka_json.java_json(decoded["record_name"], decoded["version"], decoded["data"])
    return f'{{"type":"{decoded["type"]}","version":{decoded["version"]},"data":{data}}}'
