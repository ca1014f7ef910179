"""Group state from decoded response bodies: shared by the capture replay and the live client.

OffsetFetch (every version shape), DescribeGroups, ConsumerGroupDescribe and ListGroups answer
in their own structures; these turn them into the model's Group, Member and Commit.
"""

from __future__ import annotations

from kinspect.groups.model import CLASSIC, CONSUMER, FETCHED, Commit, Group, Member
from kinspect.storage.offsets_records import decode_consumer_protocol
from kinspect.wire.apis import error_name

NO_OFFSET = -1


def topic_of(entry: dict, names: dict[str, str]) -> str:
    """A topic entry's name: its own name field, else its id resolved, else the id itself."""
    name = entry.get("name") or entry.get("topic") or entry.get("topic_name")
    if name:
        return name
    topic_id = entry.get("topic_id")
    return names.get(topic_id, topic_id)


def fetched_groups(response: dict, request: dict | None) -> list[tuple[str, int, list[dict]]]:
    """(group id, group error code, topics) from an OffsetFetch response of any version.

    Versions before 8 answer for the one group of their request, with the error at top level.
    """
    if "groups" in response:
        return [(g.get("group_id"), g.get("error_code", 0), g.get("topics") or [])
                for g in response.get("groups") or ()]
    group_id = (request or {}).get("group_id")
    return [(group_id, response.get("error_code", 0), response.get("topics") or [])]


def fetched_offsets(group_id: str, topics: list[dict], names: dict[str, str],
                    when_ms: int | None = None, source: str | None = None
                    ) -> tuple[list[Commit], list[tuple[str, int]], list[tuple[str, int, str]]]:
    """(offsets found, partitions with no offset, (topic, partition, error) per failed one)."""
    found, absent, failed = [], [], []
    for topic in topics:
        name = topic_of(topic, names)
        for p in topic.get("partitions") or ():
            partition = p.get("partition_index")
            error = p.get("error_code", 0)
            if error:
                failed.append((name, partition, error_name(error)))
            elif p.get("committed_offset", NO_OFFSET) < 0:
                absent.append((name, partition))
            else:
                found.append(Commit(group_id, name, partition, p["committed_offset"],
                                    p.get("committed_leader_epoch", -1), p.get("metadata"),
                                    when_ms, source=source, outcome=FETCHED))
    return found, absent, failed


def classic_group(entry: dict) -> Group:
    """A DescribeGroups response group (members' assignment bytes decoded when "consumer")."""
    group = Group(entry["group_id"], CLASSIC, protocol_type=entry.get("protocol_type"),
                  protocol=entry.get("protocol_data") or None, state=entry.get("group_state"))
    consumer = entry.get("protocol_type") == "consumer"
    for raw in entry.get("members") or ():
        member = Member(raw["member_id"], raw.get("group_instance_id"), raw.get("client_id"),
                        raw.get("client_host"))
        if consumer:
            assignment = _consumer_protocol("ConsumerProtocolAssignment",
                                            raw.get("member_assignment"))
            subscription = _consumer_protocol("ConsumerProtocolSubscription",
                                              raw.get("member_metadata"))
            if assignment:
                member.assignment = [(t["topic"], p)
                                     for t in assignment.get("assigned_partitions") or ()
                                     for p in t.get("partitions") or ()]
            if subscription:
                member.subscribed_topics = subscription.get("topics")
        group.members[member.member_id] = member
    return group


def consumer_group(entry: dict, names: dict[str, str]) -> Group:
    """A ConsumerGroupDescribe response group (KIP-848)."""
    group = Group(entry["group_id"], CONSUMER, protocol_type="consumer",
                  protocol=entry.get("assignor_name"), epoch=entry.get("group_epoch"),
                  target_epoch=entry.get("assignment_epoch"), state=entry.get("group_state"))
    for raw in entry.get("members") or ():
        member = Member(raw["member_id"], raw.get("instance_id"), raw.get("client_id"),
                        raw.get("client_host"), raw.get("rack_id"),
                        _described_assignment(raw.get("assignment"), names),
                        _described_assignment(raw.get("target_assignment"), names),
                        raw.get("member_epoch"), None, raw.get("subscribed_topic_names"),
                        raw.get("subscribed_topic_regex"))
        group.members[member.member_id] = member
    return group


def _described_assignment(assignment: dict | None, names: dict[str, str]) -> list[tuple[str, int]]:
    out = []
    for entry in (assignment or {}).get("topic_partitions") or ():
        name = topic_of(entry, names)
        out.extend((name, p) for p in entry.get("partitions") or ())
    return out


def _consumer_protocol(name: str, raw) -> dict | None:
    if not isinstance(raw, (bytes, bytearray)) or not raw:
        return None
    return decode_consumer_protocol(name, bytes(raw))
