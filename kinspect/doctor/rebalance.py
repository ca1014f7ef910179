"""rebalance: how often each consumer group rebalanced, who joined, left or timed out, and how
long the group had no assignment.

Classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup): a generation is formed by JoinGroup
responses and assigned by SyncGroup responses. The first generation the capture shows is the
group forming, not a rebalance; each later one is. A round starts at its first sign (a
JoinGroup request, a LeaveGroup, REBALANCE_IN_PROGRESS told to a member) and the group is
without an assignment until the last SyncGroup response of the new generation (``pause_ms``).
A member of the previous generation that is not in the new one left: with a LeaveGroup (its
reason, v5+), or without one, which is its session timing out (a killed or stuck client; the
coordinator's UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION answers say the same).

KIP-848 consumer groups (ConsumerGroupHeartbeat) and share groups (ShareGroupHeartbeat): the
member epochs the coordinator hands out follow the group epoch. A rebalance is an epoch the
members move to after the first; its pause lasts until every member still heartbeating has
reached it. Heartbeats carry fields only when they change, so members are kept.

Severity: warning when a member timed out or was fenced, or the group rebalanced at least
``--max-rebalances`` times; info for fewer, planned ones (joins, clean leaves); nothing for a
group that formed once.
"""

from __future__ import annotations

from kinspect.doctor.bounded import Bounded, series_add
from kinspect.doctor.exchanges import is_internal
from kinspect.doctor.finding import INFO, WARNING, evidence, finding
from kinspect.doctor.options import DEFAULTS, Thresholds

NAME = "rebalance"
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, OFFSET_COMMIT = 11, 12, 13, 14, 8
CONSUMER_HEARTBEAT, SHARE_HEARTBEAT = 68, 76
APIS = frozenset({JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, OFFSET_COMMIT, CONSUMER_HEARTBEAT,
                  SHARE_HEARTBEAT})
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 22, 25, 27
FENCED_INSTANCE_ID, FENCED_MEMBER_EPOCH = 82, 110
LEAVE_EPOCHS = (-1, -2)
MEMBERS = 10_000   # members kept per group
REASONS = 20       # distinct reasons kept per group


class _Round:
    __slots__ = ("started", "assigned", "generation", "reasons", "evidence")

    def __init__(self, started: float):
        self.started, self.assigned, self.generation = started, None, None
        self.reasons: dict[str, int] = {}
        self.evidence: list = []


class _Group:
    __slots__ = ("kind", "generation", "first", "synced", "members", "previous", "left", "round", "rounds",
                 "rebalances", "pause_ms", "timed_out", "reasons", "evidence", "last_seen",
                 "epochs")

    def __init__(self):
        self.kind = "classic"
        self.generation = self.first = None
        self.synced = None                # the generation last assigned (SyncGroup), while stable
        self.members: set = set()        # of the current generation (epoch)
        self.previous: set = set()       # of the generation before
        self.left: dict = {}             # member -> reason, since the last generation
        self.round: _Round | None = None
        self.rounds: list = []
        self.rebalances = 0
        self.pause_ms = 0.0
        self.timed_out = 0
        self.reasons: dict[str, int] = {}
        self.evidence: list = []
        self.last_seen: dict = {}        # member -> time of its last request
        self.epochs: dict = {}           # modern groups: member -> epoch it last reached


class Rebalance:
    name = NAME
    apis = APIS

    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.t = thresholds
        self.groups: Bounded[_Group] = Bounded("groups", thresholds.max_state, _Group)

    @property
    def bounded(self):
        return [self.groups]

    def exchange(self, record: dict) -> None:
        if is_internal(record):
            return
        request = record.get("request") or {}
        group_id = request.get("group_id")
        if not isinstance(group_id, str):
            return
        api_key = record["api_key"]
        if api_key in (CONSUMER_HEARTBEAT, SHARE_HEARTBEAT):
            self._modern(self.groups.at(group_id), record, request, record.get("response"))
            return
        if api_key == OFFSET_COMMIT and group_id not in self.groups:
            return
        self._classic(self.groups.at(group_id), record, api_key, request, record.get("response"))

    # -- classic groups --------------------------------------------------------------------

    def _classic(self, group: _Group, record, api_key, request, response) -> None:
        sent = record.get("request_time") or 0.0
        answered = record.get("response_time") or sent
        member = request.get("member_id")
        if member:
            _remember(group.last_seen, member, sent)
        error = (response or {}).get("error_code") or 0
        if api_key == JOIN_GROUP:
            if member:
                if self._open(group, sent, record) and request.get("reason"):
                    _count(group, f"rejoin: {request['reason']}")
            if response is not None and not error:
                self._joined(group, record, request, response, sent, answered)
        elif api_key == SYNC_GROUP:
            if response is not None and not error and request.get("generation_id") == group.generation:
                group.synced = group.generation
                if group.round is not None and group.round.generation == group.generation:
                    group.round.assigned = max(group.round.assigned or 0.0, answered)
        elif api_key == LEAVE_GROUP:
            for leaving in request.get("members") or ([{"member_id": member}] if member else []):
                who = leaving.get("member_id") or leaving.get("group_instance_id")
                if who:
                    reason = leaving.get("reason")
                    if who in group.left or len(group.left) < MEMBERS:
                        group.left[who] = f"left (LeaveGroup{': ' + reason if reason else ''})"
                    if len(group.members) > 1:
                        self._open(group, sent, record)
        if error == REBALANCE_IN_PROGRESS:
            self._open(group, sent, record)
            _count(group, "REBALANCE_IN_PROGRESS told to members")
        elif error in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID) and member:
            what = {UNKNOWN_MEMBER_ID: "was unknown to the coordinator (UNKNOWN_MEMBER_ID: its "
                                       "session timed out or it was removed)",
                    ILLEGAL_GENERATION: "had a past generation (ILLEGAL_GENERATION)",
                    FENCED_INSTANCE_ID: "was fenced by another instance (FENCED_INSTANCE_ID)"}[error]
            _count(group, f"a member {what}")
            group.evidence.append(evidence(record))
            del group.evidence[:-10]

    def _open(self, group: _Group, sent: float, record) -> bool:
        """A sign that a stable group starts a new round: the round opens (the one before closes).
        False while the group is forming or already rebalancing."""
        if group.synced is None or group.synced != group.generation:
            return False
        if group.round is not None:
            self._close(group)
        group.synced = None
        group.round = _Round(sent)
        group.round.evidence.append(evidence(record))
        return True

    def _joined(self, group: _Group, record, request, response, sent, answered) -> None:
        generation = response.get("generation_id")
        member = response.get("member_id")
        if not isinstance(generation, int) or generation < 0:
            return
        if group.generation is None or generation > group.generation:
            if group.first is None:
                group.first = generation
            else:
                if group.round is None or group.round.generation is not None:
                    if group.round is not None:
                        self._close(group)
                    group.round = _Round(sent)
                    group.round.evidence.append(evidence(record))
                group.round.generation = generation
            group.previous, group.members = group.members, set()
            group.generation = generation
        if generation == group.generation:
            listed = [m.get("member_id") for m in response.get("members") or ()]
            if listed:
                group.members = {m for m in listed if m}
            elif member and len(group.members) < MEMBERS:
                group.members.add(member)

    def _close(self, group: _Group) -> None:
        """The round that formed a new generation is over: who came and went, how long."""
        done, group.round = group.round, None
        if done is None or done.generation is None:
            return
        group.rebalances += 1
        reasons = dict(done.reasons)
        joined = group.members - group.previous
        for member in sorted(group.previous - group.members):
            why = group.left.get(member)
            if why is None:
                silent = group.last_seen.get(member)
                why = "timed out (no LeaveGroup: its session expired" + (
                    f" after {1000 * (done.started - silent):.0f} ms without a request)"
                    if silent is not None and silent <= done.started else ")")
                group.timed_out += 1
            reasons[f"member {member} {why}"] = 1
            group.left.pop(member, None)
        for member in sorted(joined):
            reasons[f"member {member} joined"] = 1
        for reason, count in reasons.items():
            _count(group, reason, count)
        pause = 1000 * ((done.assigned or done.started) - done.started)
        group.pause_ms += pause
        series_add(group.rounds, {"generation": done.generation, "started": done.started,
                                  "assigned": done.assigned, "pause_ms": round(pause, 3),
                                  "members": len(group.members), "joined": len(joined),
                                  "left": len(group.previous - group.members)}, self.t.series)
        group.evidence[:0] = done.evidence

    # -- KIP-848 consumer groups and share groups ------------------------------------------

    def _modern(self, group: _Group, record, request, response) -> None:
        group.kind = "share" if record["api_key"] == SHARE_HEARTBEAT else "consumer"
        sent = record.get("request_time") or 0.0
        answered = record.get("response_time") or sent
        asked = request.get("member_epoch")
        member = request.get("member_id") or (response or {}).get("member_id")
        if member:
            _remember(group.last_seen, member, sent)
        if asked in LEAVE_EPOCHS and member:
            group.epochs.pop(member, None)
            if group.first is not None and group.epochs:
                group.left[member] = "left (heartbeat with epoch %d)" % asked
            return
        if response is None:
            return
        error = response.get("error_code") or 0
        if error in (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH):
            group.epochs.pop(member, None)
            group.timed_out += 1
            name = "UNKNOWN_MEMBER_ID" if error == UNKNOWN_MEMBER_ID else "FENCED_MEMBER_EPOCH"
            _count(group, f"a member was fenced ({name}: its session expired or it fell behind)")
            group.evidence.append(evidence(record))
            del group.evidence[:-10]
            return
        epoch = response.get("member_epoch")
        member = response.get("member_id") or member
        if error or not isinstance(epoch, int) or epoch < 0 or not member:
            return
        if asked == 0 and group.first is not None:
            group.left.setdefault(member, "joined")
        if group.generation is None or epoch > group.generation:
            if group.first is None:
                group.first = epoch
            else:
                if group.round is not None:
                    self._close_modern(group)
                group.round = _Round(answered)
                group.round.generation = epoch
                group.round.evidence.append(evidence(record))
                for who, why in group.left.items():
                    group.round.reasons[f"member {who} {why}"] = 1
                group.left.clear()
                self._silent_members(group, answered, response.get("heartbeat_interval_ms"))
            group.generation = epoch
        if len(group.epochs) < MEMBERS or member in group.epochs:
            group.epochs[member] = epoch
        done = group.round
        if done is not None and done.assigned is None and \
                all(e >= done.generation for e in group.epochs.values()):
            done.assigned = answered

    def _silent_members(self, group: _Group, now: float, interval_ms) -> None:
        """Members that stopped heartbeating (no leave) before the epoch moved: their sessions
        expired; they no longer hold the new epoch back."""
        interval = (interval_ms if isinstance(interval_ms, int) and interval_ms > 0 else 5000) / 1000
        for member in [m for m in group.epochs if group.last_seen.get(m, now) < now - 2 * interval]:
            del group.epochs[member]
            group.timed_out += 1
            silent = now - group.last_seen[member]
            group.round.reasons[f"member {member} timed out (no heartbeat for {1000 * silent:.0f} ms, "
                                f"no leave)"] = 1

    def _close_modern(self, group: _Group) -> None:
        done, group.round = group.round, None
        group.rebalances += 1
        for reason, count in done.reasons.items():
            _count(group, reason, count)
        pause = 1000 * ((done.assigned or done.started) - done.started)
        group.pause_ms += pause
        series_add(group.rounds, {"generation": done.generation, "started": done.started,
                                  "assigned": done.assigned, "pause_ms": round(pause, 3),
                                  "members": len(group.epochs)}, self.t.series)
        group.evidence[:0] = done.evidence

    # -- findings --------------------------------------------------------------------------

    def finish(self, end: float):
        for group_id, group in self.groups.items.items():
            if group.round is not None and group.round.generation is not None:
                if group.kind == "classic":
                    self._close(group)
                else:
                    self._close_modern(group)
            if not group.rebalances and not group.timed_out:
                continue
            severity = WARNING if group.timed_out or group.rebalances >= self.t.rebalances else INFO
            members = len(group.members) if group.kind == "classic" else len(group.epochs)
            reasons = sorted(group.reasons.items(), key=lambda item: -item[1])
            summary = (f"group {group_id} rebalanced {group.rebalances} time"
                       f"{'' if group.rebalances == 1 else 's'}"
                       + (f", {group.timed_out} member(s) timed out or fenced" if group.timed_out else "")
                       + f"; {group.pause_ms / 1000:.1f} s without an assignment")
            yield finding(NAME, severity, summary, group.evidence, group=group_id,
                          group_type=group.kind, rebalances=group.rebalances, members=members,
                          generation=group.generation, timed_out=group.timed_out,
                          reasons=[{"reason": r, "count": n} for r, n in reasons],
                          pause_ms=round(group.pause_ms, 3),
                          rounds=list(group.rounds))


def _count(group: _Group, reason: str, count: int = 1) -> None:
    if reason in group.reasons or len(group.reasons) < REASONS:
        group.reasons[reason] = group.reasons.get(reason, 0) + count


def _remember(seen: dict, member, when: float) -> None:
    if member in seen or len(seen) < MEMBERS:
        seen[member] = when
