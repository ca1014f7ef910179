"""What a replay knows about groups: committed offsets, members, state, and every commit seen.

The same shapes come out of every source (a log dir, segment files, a capture, a live broker),
so the describe views and the renderers do not care where they came from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

NO_PRODUCER = -1

# group kinds, as Kafka's GroupType names them
CLASSIC = "classic"
CONSUMER = "consumer"
SHARE = "share"
STREAMS = "streams"

# outcomes of a commit in the history
COMMITTED = "committed"      # in effect when written (or when its transaction committed)
PENDING = "pending"          # transactional, no COMMIT/ABORT marker seen (yet)
ABORTED = "aborted"          # its transaction aborted: never in effect
SUPERSEDED = "superseded"    # its transaction committed, but a later plain commit already won
DELETED = "deleted"          # an offset tombstone (offset deleted or expired)
REJECTED = "rejected"        # capture: the broker answered with an error
UNANSWERED = "unanswered"    # capture: no response seen, so the outcome is unknown
FETCHED = "fetched"          # capture: what an OffsetFetch response said was committed


@dataclass(slots=True)
class Commit:
    """One committed offset of one group for one topic partition."""
    group: str
    topic: str
    partition: int
    offset: int | None                    # None in a tombstone's history entry
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int | None = None   # ms since the epoch
    expire_timestamp: int | None = None   # value v1 only
    record_offset: int | None = None      # its offset in __consumer_offsets (or None)
    producer_id: int = NO_PRODUCER        # transactional commits
    source: str | None = None             # the segment file, or the capture's connection
    position: int | None = None           # the batch's byte position in that file
    batch_offset: int | None = None       # the batch's base offset
    outcome: str = COMMITTED
    error: str | None = None              # capture: the broker's error code name

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None = None
    client_id: str | None = None
    client_host: str | None = None
    rack_id: str | None = None
    # (topic name, or topic id where no name is known, partition)
    assignment: list[tuple[str, int]] = field(default_factory=list)
    target_assignment: list[tuple[str, int]] | None = None
    member_epoch: int | None = None
    member_state: int | None = None       # consumer groups: 0 stable, 1/2 reconciling
    subscribed_topics: list[str] | None = None
    subscribed_regex: str | None = None
    session_timeout_ms: int | None = None
    rebalance_timeout_ms: int | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        out["assignment"] = [list(tp) for tp in self.assignment]
        if self.target_assignment is not None:
            out["target_assignment"] = [list(tp) for tp in self.target_assignment]
        return out


@dataclass(slots=True)
class Group:
    group_id: str
    kind: str = CLASSIC
    protocol_type: str | None = None      # classic: "consumer", "connect", "" for simple groups
    protocol: str | None = None           # classic: the assignor; modern: the server assignor
    epoch: int | None = None              # classic: generation; modern: group epoch
    target_epoch: int | None = None       # modern: target assignment epoch
    leader: str | None = None
    state: str | None = None              # set by the source (live) or derived by replay
    members: dict[str, Member] = field(default_factory=dict)
    offsets: dict[tuple[str, int], Commit] = field(default_factory=dict)
    targets: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # modern: by member
    deleted: bool = False                 # its group record was deleted (a tombstone)
    state_timestamp: int | None = None    # classic: currentStateTimestamp
    coordinator: str | None = None        # "__consumer_offsets-12" or "host:port (id 1)"
    extra: dict = field(default_factory=dict)  # regexes, topology, ... by record name

    @property
    def exists(self) -> bool:
        """Kafka would list it: a live group record, or committed offsets (a simple group)."""
        return not self.deleted or bool(self.offsets)

    def to_dict(self) -> dict:
        return {"group_id": self.group_id, "group_type": self.kind,
                "protocol_type": self.protocol_type, "protocol": self.protocol,
                "epoch": self.epoch, "target_epoch": self.target_epoch, "leader": self.leader,
                "state": self.state, "members": len(self.members),
                "partitions": len(self.offsets), "deleted": self.deleted,
                "coordinator": self.coordinator}


@dataclass(slots=True)
class GroupsView:
    """Everything one source says: groups by id, the commit history, where it came from."""
    groups: dict[str, Group] = field(default_factory=dict)
    history: list[Commit] = field(default_factory=list)
    log_end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    topic_names: dict[str, str] = field(default_factory=dict)  # topic id → name
    notes: list[str] = field(default_factory=list)             # "group g is in partition 12"
    problems: list = field(default_factory=list)               # kinspect.problems.Problem
