"""The transactional-commit rule of the offsets replay, on the lab broker's own segment, with the
transactional producer and the broker as oracles (issue 30, thin guards: one test only).

samples/kafka-4.1.2: producer ``lab-txn-offsets`` sent offsets of group ``group-txn`` in three
transactions (commit, abort, commit). Its manifest says what each transaction held and how it
ended, as the producer saw it, and what the broker answered ``committed()`` afterwards. Replayed
batch by batch, the group's offsets must hold a transaction's commits from its COMMIT marker on
and never before, and never an aborted one's.
"""

import json

from kinspect.groups.replay import OffsetsReplay
from kinspect.storage.segment import walk_segment
from tests.conftest import SAMPLES

KAFKA4 = SAMPLES / "kafka-4.1.2"
SEGMENT = KAFKA4 / "logs" / "__consumer_offsets-30" / "00000000000000000000.log"
GROUP = "group-txn"


def _steps(name: str) -> list[dict]:
    manifest = json.loads((KAFKA4 / "manifest.json").read_text())
    return [s for s in manifest["steps"] if s.get("name") == name]


def _transactions() -> list[tuple[dict, str]]:
    """(offsets sent to the transaction, "commit" or "abort") of each of the producer's transactions."""
    [producer] = [s for s in _steps("lab-txn-offsets") if s["step"] == "java_produce"]
    out, held = [], {}
    for event in producer["events"]:
        if event["event"] == "txn_offsets":
            for o in event["offsets"]["offsets"]:
                held[(o["topic"], o["partition"])] = (o["offset"], o.get("metadata", ""))
        elif event["event"] == "transaction":
            out.append((held, event["outcome"]))
            held = {}
    return out


def _offsets(replay: OffsetsReplay) -> dict:
    group = replay.groups.get(GROUP)
    if group is None:
        return {}
    return {tp: (c.offset, c.metadata) for tp, c in group.offsets.items()}


def test_transactional_commits_count_from_their_commit_marker_and_never_when_aborted():
    transactions = _transactions()
    assert [outcome for _, outcome in transactions] == ["commit", "abort", "commit"]
    replay = OffsetsReplay()
    markers = 0
    seen = []
    for kind, batch, _ in walk_segment(SEGMENT.read_bytes(), str(SEGMENT)):
        if kind != "batch":
            continue
        replay.batch(batch, str(SEGMENT))
        if batch["is_control"] and batch["producer_id"] >= 0:
            markers += 1
        expected = {}
        for held, outcome in transactions[:markers]:  # the n-th marker ends the n-th transaction
            if outcome == "commit":
                expected.update(held)
        assert _offsets(replay) == expected, f"after the batch at offset {batch['base_offset']}"
        seen.append(len(expected))
    assert markers == 3 and seen[-1] == 2 and 0 in seen  # commits were pending before their marker
    [answer] = [e for s in _steps(GROUP) if s["step"] == "java_committed" for e in s["events"]]
    broker = {(o["topic"], o["partition"]): (o["offset"], o["metadata"]) for o in answer["offsets"]
              if o["offset"] is not None}
    assert _offsets(replay) == broker
