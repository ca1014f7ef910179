"""Expected values for the groups tests, read from samples/ (never from kinspect's output):
the kafka-dump-log --offsets-decoder output kept beside each __consumer_offsets segment and
the manifest's record of what the clients and Kafka's tools did."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from tests.conftest import SAMPLES
from tests.samples_oracle import dump_lines, need
from tests.unit.groups.oracles import describe_blocks, describe_offsets, dump_log_records

KAFKA4 = SAMPLES / "kafka-4.1.2"
EXPIRY = SAMPLES / "kafka-4.1.2-expiry"
LEGACY = SAMPLES / "kafka-3.9.2-legacy"
SEGMENT = "00000000000000000000.log"
# __consumer_offsets record types that say a group exists (or, as a tombstone, that it was
# deleted): classic group metadata, KIP-848 consumer group metadata, share group metadata
GROUP_METADATA_TYPES = {"2", "3", "11"}


def steps(sample: Path) -> list[dict]:
    return json.loads((need(sample) / "manifest.json").read_text())["steps"]


def labelled(sample: Path, label: str) -> dict:
    [step] = [s for s in steps(sample) if s.get("label") == label]
    return step


def described_offsets(sample: Path, label: str = "describe offsets") -> dict[tuple, dict]:
    """(group, topic, partition) → kafka-consumer-groups --describe --all-groups's row."""
    return describe_offsets(labelled(sample, label)["output"])


def described_states(sample: Path) -> dict[str, dict]:
    """group → kafka-consumer-groups --describe --all-groups --state's row."""
    blocks = describe_blocks(labelled(sample, "describe state")["output"])
    return {row["GROUP"]: row for block in blocks for row in block}


def deleted_groups(sample: Path) -> set[str]:
    """The groups deleted with kafka-consumer-groups --delete."""
    return {s["args"][s["args"].index("--group") + 1] for s in steps(sample)
            if s["step"] == "kafka-consumer-groups" and "--delete" in s["args"]}


def offsets_dirs(sample: Path) -> list[Path]:
    return sorted(need(sample).joinpath("logs").glob("__consumer_offsets-*"))


def dumped(directory: Path) -> list[dict]:
    """kafka-dump-log's records of one __consumer_offsets partition, segments in offset order."""
    records = []
    for log in sorted(directory.glob("*.log")):
        records += dump_log_records("\n".join(dump_lines(log)))
    return records


def group_of(record: dict) -> str | None:
    return None if "marker" in record else record["key"]["data"].get("group") or \
        record["key"]["data"].get("groupId")


def coordinator(sample: Path, group: str) -> Path:
    """The __consumer_offsets partition directory whose records are the group's."""
    [directory] = [d for d in offsets_dirs(sample) if any(group_of(r) == group for r in dumped(d))]
    return directory


def commits(records: list[dict], group: str | None = None) -> list[dict]:
    """The offset commit records (key types 0 and 1), tombstones included."""
    return [r for r in records if "marker" not in r and r["key"]["type"] in ("0", "1")
            and (group is None or r["key"]["data"]["group"] == group)]


def last_group_metadata(records: list[dict], group: str) -> dict | None:
    """The payload of the group's last classic group metadata record (None: a tombstone)."""
    [*_, last] = [r for r in records if "marker" not in r and r["key"]["type"] == "2"
                  and r["key"]["data"]["group"] == group]
    return last["payload"] and last["payload"]["data"]


def iso_millis(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"
