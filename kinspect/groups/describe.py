"""Rows for the offsets command, like kafka-consumer-groups --describe (and its --members and
--state), plus the group list and the commit history. Plain dicts, ready for JSON Lines or a
table; None where a value is unknown.
"""

from __future__ import annotations

import datetime as _dt

from kinspect.groups.model import Group, GroupsView

OFFSET_COLUMNS = ["group", "topic", "partition", "current_offset", "log_end_offset", "lag",
                  "consumer_id", "host", "client_id", "committed_at", "metadata"]
MEMBER_COLUMNS = ["group", "consumer_id", "instance_id", "host", "client_id", "partitions",
                  "member_epoch", "assignment"]
STATE_COLUMNS = ["group", "coordinator", "group_type", "assignment_strategy", "state", "epoch",
                 "members", "partitions"]
HISTORY_COLUMNS = ["committed_at", "group", "topic", "partition", "offset", "outcome",
                   "metadata", "record_offset", "producer_id", "batch"]
LIST_COLUMNS = ["group", "group_type", "state", "members", "partitions", "coordinator"]


def offset_rows(view: GroupsView, group: Group) -> list[dict]:
    """One row per partition with a committed offset or an owner, sorted by topic, partition."""
    owners = {}
    for member in group.members.values():
        for topic, partition in member.assignment:
            owners[(view.topic_names.get(topic, topic), partition)] = member
    rows = []
    for topic, partition in sorted(set(group.offsets) | set(owners), key=_tp_key):
        commit = group.offsets.get((topic, partition))
        member = owners.get((topic, partition))
        current = commit.offset if commit else None
        end = view.log_end_offsets.get((topic, partition))
        rows.append({
            "type": "offset", "group": group.group_id, "topic": topic, "partition": partition,
            "current_offset": current, "log_end_offset": end,
            "lag": end - current if end is not None and current is not None else None,
            "consumer_id": member.member_id if member else None,
            "host": member.client_host if member else None,
            "client_id": member.client_id if member else None,
            "leader_epoch": commit.leader_epoch if commit else None,
            "metadata": commit.metadata if commit else None,
            "commit_timestamp": commit.commit_timestamp if commit else None,
            "committed_at": iso_time(commit.commit_timestamp) if commit else None,
            "expire_timestamp": commit.expire_timestamp if commit else None,
            "record_offset": commit.record_offset if commit else None,
            "producer_id": commit.producer_id if commit and commit.producer_id >= 0 else None,
            "source": commit.source if commit else None,
        })
    return rows


def member_rows(view: GroupsView, group: Group) -> list[dict]:
    rows = []
    for member in sorted(group.members.values(), key=lambda m: _text_key(m.member_id)):
        assignment = _named(view, member.assignment)
        target = None if member.target_assignment is None else _named(view,
                                                                       member.target_assignment)
        rows.append({
            "type": "member", "group": group.group_id, "consumer_id": member.member_id,
            "instance_id": member.instance_id, "host": member.client_host,
            "client_id": member.client_id, "rack_id": member.rack_id,
            "partitions": len(assignment), "member_epoch": member.member_epoch,
            "assignment": _by_topic(assignment),
            "target_assignment": None if target is None else _by_topic(target),
            "subscribed_topics": member.subscribed_topics,
            "subscribed_regex": member.subscribed_regex,
        })
    return rows


def state_row(group: Group) -> dict:
    return {"type": "group", "group": group.group_id, "coordinator": group.coordinator,
            "group_type": group.kind, "protocol_type": group.protocol_type,
            "assignment_strategy": group.protocol, "state": group.state, "epoch": group.epoch,
            "target_epoch": group.target_epoch, "members": len(group.members),
            "partitions": len(group.offsets), "deleted": group.deleted}


def history_rows(view: GroupsView, group_id: str | None = None) -> list[dict]:
    rows = []
    for commit in view.history:
        if group_id is not None and commit.group != group_id:
            continue
        rows.append({"type": "commit", **commit.to_dict(),
                     "committed_at": iso_time(commit.commit_timestamp),
                     "producer_id": commit.producer_id if commit.producer_id >= 0 else None,
                     "batch": _batch(commit)})
    return rows


def listed_groups(view: GroupsView, include_deleted: bool = True) -> list[Group]:
    return [g for _, g in sorted(view.groups.items(), key=lambda item: _text_key(item[0]))
            if include_deleted or g.exists]


def iso_time(ms: int | None) -> str | None:
    if ms is None or ms < 0:
        return None
    try:
        moment = _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _batch(commit) -> str | None:
    """Where a history entry came from: partition/segment@position, or the connection."""
    if commit.position is None or not commit.source:
        return commit.source
    parts = commit.source.replace("\\", "/").split("/")
    return f"{'/'.join(parts[-2:])}@{commit.position}"


def _by_topic(pairs) -> dict[str, list[int]]:
    """{"orders": [0, 1, 2]}: the assignment as kafka-consumer-groups groups it (a name that is
    not UTF-8 becomes its text key: bytes cannot be a JSON object's key)."""
    out: dict[str, list[int]] = {}
    for topic, partition in pairs:
        out.setdefault(_text_key(topic) if isinstance(topic, bytes) else topic, []).append(partition)
    return out


def _named(view: GroupsView, pairs) -> list[tuple[str, int]]:
    return sorted(((view.topic_names.get(t, t), p) for t, p in pairs), key=_tp_key)


def _tp_key(tp: tuple[str, int]):
    return (_text_key(tp[0]), tp[1] if isinstance(tp[1], int) else -1)


def _text_key(name) -> str:
    """A name to sort by: one that is not UTF-8 stays bytes in the decoded body (JSON shows it
    as {"b64": ...}), and bytes do not compare with str."""
    return name.decode("utf-8", "backslashreplace") if isinstance(name, bytes) else str(name)
