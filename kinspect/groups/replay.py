"""Replay __consumer_offsets into group state the way the group coordinator loads it.

    replay = OffsetsReplay(group="orders-app", history=True)
    for kind, batch, problems in walk_segment(buf, path):     # in offset order
        if kind == "batch":
            replay.batch(batch, path)
    view = replay.finish()          # GroupsView: groups, offsets, history, problems

The rules are the broker's (OffsetMetadataManager / GroupMetadataManager replay): records in
offset order, the last write per key wins, a tombstone deletes what its key names (a group
record tombstone the group, an offset tombstone that offset and any pending transactional
commit of it). Commits in transactional batches stay pending per producer id until that
producer's COMMIT marker (then each wins unless a plain commit written later already did) or
ABORT (then they are dropped). An offset commit for a group with no group record makes a
"simple" classic group, as Kafka does.

Sans-I/O: decoded batches in, a GroupsView out. Records that do not decode cleanly are
reported with their position and skipped; the replay goes on.
"""

from __future__ import annotations

import struct

from kinspect.groups.commit_records import decode_commit
from kinspect.groups.model import (ABORTED, CLASSIC, COMMITTED, CONSUMER, DELETED,
                                   NO_PRODUCER, PENDING, SHARE, STREAMS, SUPERSEDED, Commit,
                                   Group, GroupsView, Member)
from kinspect.problems import ERROR, WARNING, Problem, ProblemCap
from kinspect.storage.offsets_records import decode_offsets_record

OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA = 2
# modern group record types → (group kind, what the record holds)
MODERN = {
    3: (CONSUMER, "metadata"), 4: (CONSUMER, "extra"), 5: (CONSUMER, "member"),
    6: (CONSUMER, "target_epoch"), 7: (CONSUMER, "target_member"), 8: (CONSUMER, "current"),
    16: (CONSUMER, "extra"),
    9: (SHARE, "extra"), 10: (SHARE, "member"), 11: (SHARE, "metadata"),
    12: (SHARE, "target_epoch"), 13: (SHARE, "target_member"), 14: (SHARE, "current"),
    15: (SHARE, "extra"),
    17: (STREAMS, "metadata"), 19: (STREAMS, "member"), 20: (STREAMS, "target_epoch"),
    21: (STREAMS, "target_member"), 22: (STREAMS, "current"), 23: (STREAMS, "extra"),
}
STABLE_MEMBER = 0  # MemberState.STABLE
_I16 = struct.Struct(">h")


class OffsetsReplay:
    def __init__(self, *, group: str | None = None, history: bool = False,
                 coordinator: str | None = None):
        self.only = group
        self._only_key = None if group is None else group.encode()
        self.keep_history = history
        self.coordinator = coordinator
        self.groups: dict[str, Group] = {}
        self.pending: dict[int, dict[tuple[str, str, int], Commit]] = {}
        self.history: list[Commit] = []
        self.problems: list[Problem] = []
        self._problems = ProblemCap(self.problems, keep=50)  # a million bad records: counted
        self.records = 0
        self._previous_offset: int | None = None

    # -- input ---------------------------------------------------------------------------------

    def batch(self, batch: dict, source: str = "") -> None:
        """One decoded unit from walk_segment / iter_batches (v2 batch or legacy message)."""
        position = batch.get("position")
        if not batch.get("crc_valid", True):
            self._problems.append(Problem(
                "batch fails its CRC: its records are not replayed", source, position, ERROR,
                "replay_crc"))
            return
        base = batch.get("base_offset", batch.get("offset"))
        if self._previous_offset is not None and base is not None and base <= self._previous_offset:
            self._problems.append(Problem(
                f"batch at offset {base} is not after offset {self._previous_offset}: replayed "
                f"anyway (give segments in offset order, each once)", source, position, WARNING,
                "replay_order", f"> {self._previous_offset}", base))
        if batch.get("is_control"):
            control = batch.get("control") or {}
            if control.get("type") in ("COMMIT", "ABORT"):
                self._end_transaction(batch["producer_id"], control["type"] == "COMMIT")
            self._advance(batch)
            return
        producer_id = batch["producer_id"] if batch.get("is_transactional") else NO_PRODUCER
        for record in batch.get("records") or ():
            self.record(record["offset"], record["key"], record["value"], producer_id,
                        source, position, base)
        self._advance(batch)

    def record(self, offset: int, key: bytes | None, value: bytes | None,
               producer_id: int = NO_PRODUCER, source: str = "", position: int | None = None,
               batch_offset: int | None = None) -> None:
        if self._only_key is not None and _key_group(key) not in (self._only_key, None):
            return
        self.records += 1
        fast = decode_commit(key, value)
        if fast is not None:
            group_id, topic, partition, fields = fast
            if self.only is None or group_id == self.only:
                self._offset_commit(offset, group_id, topic, partition, fields, producer_id,
                                    source, position, batch_offset)
            return
        decoded, problems = decode_offsets_record(key, value)
        where = f"{source} → offset {offset}" if source else f"offset {offset}"
        errors = [p for p in problems if p.severity == ERROR]
        for p in problems:
            if p.severity != "info" and p.check != "record_version":  # said below, in context
                self._problems.append(Problem(p.what, f"{where} → {p.path}", position, p.severity,
                                              p.check or "offsets_record", p.expected, p.found))
        record_type = decoded["record_type"]
        known = record_type in OFFSET_COMMIT_TYPES or record_type == GROUP_METADATA \
            or record_type in MODERN
        if errors or not known:
            if known:
                self._problems.append(Problem(
                    f"{decoded['record_name']} record not replayed: it does not decode cleanly",
                    where, position, ERROR, "replay_record"))
            return
        key, value = decoded["key"], decoded["value"]
        if value is not None and not isinstance(value, dict):  # a value version we do not know
            self._problems.append(Problem(
                f"{decoded['record_name']} value version {decoded['value_version']} is unknown: "
                f"record not replayed", where, position, WARNING, "replay_record"))
            return
        group_id = key.get("group", key.get("group_id"))
        if self.only is not None and group_id != self.only:
            return
        if record_type in OFFSET_COMMIT_TYPES:
            self._offset_commit(offset, group_id, key["topic"], key["partition"], value,
                                producer_id, source, position, batch_offset)
        elif record_type == GROUP_METADATA:
            self._classic_group(group_id, value)
        else:
            kind, role = MODERN[record_type]
            self._modern_group(group_id, kind, role, decoded["record_name"], key, value)

    def finish(self) -> GroupsView:
        for group in self.groups.values():
            group.state = derive_state(group)
            group.coordinator = group.coordinator or self.coordinator
            for member_id, target in group.targets.items():
                if member_id in group.members:
                    group.members[member_id].target_assignment = target
        open_commits = sum(len(p) for p in self.pending.values())
        notes = []
        if open_commits:
            notes.append(f"{open_commits} transactional offset commits of producer ids "
                         f"{sorted(self.pending)} have no COMMIT or ABORT marker yet: pending")
        self._problems.close("__consumer_offsets", None)
        return GroupsView(groups=dict(self.groups), history=list(self.history), notes=notes,
                          problems=list(self.problems))

    # -- offsets -------------------------------------------------------------------------------

    def _offset_commit(self, record_offset, group_id, topic, partition, value, producer_id,
                       source, position, batch_offset) -> None:
        if value is None:
            group = self.groups.get(group_id)
            if group is not None:
                group.offsets.pop((topic, partition), None)
            for pending in self.pending.values():
                cancelled = pending.pop((group_id, topic, partition), None)
                if cancelled is not None:
                    cancelled.outcome = SUPERSEDED
            if self.keep_history:
                self.history.append(Commit(group_id, topic, partition, None,
                                           record_offset=record_offset, source=source,
                                           position=position, batch_offset=batch_offset,
                                           metadata=None, outcome=DELETED))
            return
        group = self._group_or_simple(group_id)
        commit = Commit(group_id, topic, partition, value["offset"],
                        value.get("leader_epoch", -1), value.get("metadata"),
                        value.get("commit_timestamp"), value.get("expire_timestamp"),
                        record_offset, producer_id, source, position, batch_offset)
        if producer_id == NO_PRODUCER:
            group.offsets[(topic, partition)] = commit
        else:
            commit.outcome = PENDING
            self.pending.setdefault(producer_id, {})[(group_id, topic, partition)] = commit
        if self.keep_history:
            self.history.append(commit)

    def _end_transaction(self, producer_id: int, committed: bool) -> None:
        pending = self.pending.pop(producer_id, None)
        if not pending:
            return
        for (group_id, topic, partition), commit in pending.items():
            if not committed:
                commit.outcome = ABORTED
                continue
            group = self._group_or_simple(group_id)
            existing = group.offsets.get((topic, partition))
            if existing is None or commit.record_offset > existing.record_offset:
                commit.outcome = COMMITTED
                group.offsets[(topic, partition)] = commit
            else:
                commit.outcome = SUPERSEDED

    # -- groups --------------------------------------------------------------------------------

    def _group_or_simple(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, CLASSIC, protocol_type="")
        elif group.deleted:
            _reset(group, CLASSIC)
            group.protocol_type = ""
        return group

    def _classic_group(self, group_id: str, value: dict | None) -> None:
        group = self.groups.get(group_id)
        if value is None:
            if group is not None and group.kind == CLASSIC:
                _reset(group, CLASSIC)
                group.deleted = True
            return
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        else:
            _reset(group, CLASSIC)
        group.protocol_type = value.get("protocol_type")
        group.protocol = value.get("protocol")
        group.epoch = value.get("generation")
        group.leader = value.get("leader")
        group.state_timestamp = value.get("current_state_timestamp")
        for raw in value.get("members") or ():
            member = Member(raw["member_id"], raw.get("group_instance_id"), raw.get("client_id"),
                            raw.get("client_host"),
                            session_timeout_ms=raw.get("session_timeout"),
                            rebalance_timeout_ms=raw.get("rebalance_timeout"))
            subscription, assignment = raw.get("subscription"), raw.get("assignment")
            if isinstance(subscription, dict):
                member.subscribed_topics = subscription.get("topics")
            if isinstance(assignment, dict):
                member.assignment = _topic_partitions(assignment.get("assigned_partitions"),
                                                      "topic")
            group.members[member.member_id] = member

    def _modern_group(self, group_id, kind, role, record_name, key, value) -> None:
        group = self.groups.get(group_id)
        if group is None or group.deleted or group.kind != kind:
            if value is None:
                return  # deletes something that is not there (or of another group type)
            if group is None:
                group = self.groups[group_id] = Group(group_id)
            _reset(group, kind)
        member_id = key.get("member_id")
        if role == "metadata":
            if value is None:
                _reset(group, kind)
                group.deleted = True
            else:
                group.epoch = value.get("epoch")
        elif role == "member":
            if value is None:
                group.members.pop(member_id, None)
                return
            member = group.members.get(member_id) or Member(member_id)
            group.members[member_id] = member
            member.instance_id = value.get("instance_id")
            member.rack_id = value.get("rack_id")
            member.client_id = value.get("client_id")
            member.client_host = value.get("client_host")
            member.subscribed_topics = value.get("subscribed_topic_names")
            member.subscribed_regex = value.get("subscribed_topic_regex") or None
            member.rebalance_timeout_ms = value.get("rebalance_timeout_ms")
            classic = value.get("classic_member_metadata")
            if isinstance(classic, dict):
                member.session_timeout_ms = classic.get("session_timeout_ms")
            if value.get("server_assignor"):
                group.protocol = value["server_assignor"]
        elif role == "target_epoch":
            group.target_epoch = None if value is None else value.get("assignment_epoch")
        elif role == "target_member":
            if value is None:
                group.targets.pop(member_id, None)
            else:
                group.targets[member_id] = _assignment(kind, value, target=True)
        elif role == "current":
            member = group.members.get(member_id)
            if value is None:
                if member is not None:
                    member.member_epoch, member.member_state, member.assignment = -1, None, []
                return
            if member is None:
                member = group.members[member_id] = Member(member_id)
            member.member_epoch = value.get("member_epoch")
            member.member_state = value.get("state")
            member.assignment = _assignment(kind, value, target=False)
        else:
            slot = record_name
            if "regular_expression" in key:
                slots = group.extra.setdefault(record_name, {})
                if value is None:
                    slots.pop(key["regular_expression"], None)
                else:
                    slots[key["regular_expression"]] = value
                return
            if value is None:
                group.extra.pop(slot, None)
            else:
                group.extra[slot] = value

    def _advance(self, batch: dict) -> None:
        if batch.get("magic") == 2:
            self._previous_offset = batch["base_offset"] + batch["last_offset_delta"]
        else:
            self._previous_offset = batch.get("offset")


def derive_state(group: Group) -> str:
    """The state Kafka would give the group right after loading these records."""
    if group.deleted:
        return "Empty" if group.offsets else "Dead"
    members = group.members
    if not members:
        return "Empty"
    if group.kind == CLASSIC or group.kind == SHARE:
        return "Stable"
    if group.kind == STREAMS and "StreamsGroupTopology" not in group.extra:
        return "NotReady"
    target = group.target_epoch if group.target_epoch is not None else -1
    if (group.epoch or 0) > target:
        return "Assigning"
    for member in members.values():
        if member.member_state != STABLE_MEMBER or member.member_epoch != target:
            return "Reconciling"
    return "Stable"


def _reset(group: Group, kind: str) -> None:
    """A fresh group record of this kind: everything but the offsets (kept apart, as in Kafka)."""
    offsets, group_id = group.offsets, group.group_id
    fresh = Group(group_id, kind, protocol_type=None if kind == CLASSIC else kind)
    for name in Group.__slots__:
        setattr(group, name, getattr(fresh, name))
    group.offsets = offsets


def _assignment(kind: str, value: dict, target: bool) -> list[tuple[str, int]]:
    if kind == STREAMS:
        tasks = value.get("active_tasks") or ()
        return [(f"subtopology {t.get('subtopology_id')}", p)
                for t in tasks for p in t.get("partitions") or ()]
    field = "topic_partitions" if target else "assigned_partitions"
    return _topic_partitions(value.get(field), "topic_id")


def _topic_partitions(entries, topic_field: str) -> list[tuple[str, int]]:
    out = []
    for entry in entries or ():
        topic = entry.get(topic_field) or entry.get("topic") or entry.get("topic_id")
        out.extend((topic, p) for p in entry.get("partitions") or ())
    return out


def _key_group(key: bytes | None) -> bytes | None:
    """The group id at the start of every key struct (int16 type, int16 length, bytes)."""
    if key is None or len(key) < 4:
        return None
    size = _I16.unpack_from(key, 2)[0]
    if size < 0 or 4 + size > len(key):
        return None
    return bytes(key[4:4 + size])
