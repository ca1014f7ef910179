"""Where offsets come from: a broker's log dir, segment files, a capture, or a live broker.

Each reader returns a GroupsView; the I/O happens here (files read through mmap, a capture
through DecodeRun, sockets in live.py), the replaying in the sans-I/O replay / exchanges.
Input that cannot be read at all raises SourceUnreadable; damage inside it is a Problem in
the view, and the replay goes on past it.
"""

from __future__ import annotations

from pathlib import Path

from kinspect.groups import logdir
from kinspect.groups.exchanges import REPLAYED_APIS, CaptureReplay
from kinspect.groups.live import Cluster, LiveError
from kinspect.groups.model import GroupsView
from kinspect.groups.partition import DEFAULT_PARTITIONS, partition_for
from kinspect.groups.replay import OffsetsReplay
from kinspect.limits import DEFAULT_LIMITS, Limits
from kinspect.decode.pipeline import CaptureUnreadable, DecodeRun
from kinspect.problems import INFO, WARNING, Problem, ProblemCap
from kinspect.storage import files
from kinspect.storage.mapped import mapped
from kinspect.storage.segment import walk_segment

OFFSETS_TOPIC = logdir.OFFSETS_TOPIC


class SourceUnreadable(Exception):
    """The log dir, file, capture or broker cannot be read at all."""


def read_log_dir(log_dir: Path, group: str | None = None, *, partitions: int | None = None,
                 history: bool = False, limits: Limits = DEFAULT_LIMITS) -> GroupsView:
    """Replay the __consumer_offsets partition that holds `group` (all of them without one)."""
    if not log_dir.is_dir():
        raise SourceUnreadable(f"{log_dir}: not a directory")
    held = logdir.offsets_partitions(log_dir)
    if not held:
        raise SourceUnreadable(f"{log_dir}: no {OFFSETS_TOPIC}-N directories: not a Kafka log "
                               f"dir, or no consumer group ever committed on this broker")
    view = GroupsView()
    if group is None:
        for number, directory in held.items():
            _merge(view, _replay_partition(directory, None, history, limits))
    else:
        count = partitions or DEFAULT_PARTITIONS
        number = partition_for(group, count)
        directory = held.get(number)
        found = None
        if directory is not None:
            found = _replay_partition(directory, group, history, limits)
        if found is not None and group in found.groups:
            view.notes.append(f"group {group} is in {OFFSETS_TOPIC}-{number} "
                              f"(abs(hashCode) % {count})")
            _merge(view, found)
        else:
            where = (f"{OFFSETS_TOPIC}-{number} is not in this log dir" if directory is None
                     else f"{OFFSETS_TOPIC}-{number} does not hold it")
            elsewhere = _search_all(held, group, history, limits, skip=number)
            if elsewhere is None:
                view.notes.append(f"group {group} not found: {where} (for {count} partitions), "
                                  f"nor does any other partition here")
                if found is not None:
                    _merge(view, found)
            else:
                other, replayed = elsewhere
                view.notes.append(f"group {group} found in {OFFSETS_TOPIC}-{other}, not in "
                                  f"{OFFSETS_TOPIC}-{number} where {count} partitions would put "
                                  f"it ({where}): is --partitions right?")
                _merge(view, replayed)
    _annotate_from_log_dir(view, log_dir)
    return view


def read_segments(paths: list[Path], group: str | None = None, *,
                  history: bool = False, limits: Limits = DEFAULT_LIMITS) -> GroupsView:
    """Replay segment files; files of one partition directory in base-offset order together."""
    by_partition: dict[Path, list[Path]] = {}
    for path in paths:
        if not path.is_file():
            raise SourceUnreadable(f"{path}: no such file")
        by_partition.setdefault(path.resolve().parent, []).append(path)
    view = GroupsView()
    for directory, logs in sorted(by_partition.items()):
        logs.sort(key=lambda p: (files.describe(p).base_offset or 0, p.name))
        replay = OffsetsReplay(group=group, history=history,
                               coordinator=directory.name if _is_offsets_dir(directory) else None)
        for path in logs:
            _replay_file(replay, path, limits)
        _merge(view, replay.finish())
    parents = {d.parent for d in by_partition if _is_offsets_dir(d)}
    if len(parents) == 1:
        _annotate_from_log_dir(view, parents.pop())
    return view


def read_capture(path: str, group: str | None = None, *, history: bool = False,
                 ports: set[int] | None = None, show_secrets: bool = False,
                 limits: Limits = DEFAULT_LIMITS, keylog=None) -> GroupsView:
    run = DecodeRun(path, show_secrets=show_secrets, limits=limits, keylog=keylog,
                    **({"ports": ports} if ports else {}))
    replay = CaptureReplay(group=group, history=history)
    cuts = ProblemCap([], keep=20)
    try:
        for record in run.records():
            replay.exchange(record)
            for problem in bounds_cut(record):
                cuts.append(problem)
    except CaptureUnreadable as e:
        raise SourceUnreadable(f"{path}: {e}") from None
    view = replay.finish()
    cuts.close(path, None)
    view.problems += run.capture_problems + cuts.problems
    if run.tls_undecrypted:
        view.notes.append(f"{run.tls_undecrypted} TLS connection(s) in {path} could not be decrypted: "
                          f"their commits are not counted; pass --keylog FILE")
    if run.kafka_connections == 0:
        view.notes.append(f"no Kafka traffic found in {run.packets} packets of {path} "
                          f"(another broker port? --port N)")
    return view


def bounds_cut(record: dict):
    """Problems of an exchange the replay reads (or a notice) that say a bound cut something."""
    if record.get("type") == "notice":
        if record.get("kind") == "expired":
            yield Problem(record["what"], record.get("conn", ""), None, WARNING, "max_connections")
        return
    if record.get("type") != "exchange" or record.get("api_key") not in REPLAYED_APIS:
        return
    for p in record.get("problems") or ():
        if p.get("check") in ("max_items", "records_cut") or "raise it with" in p.get("what", ""):
            where = f"{record['conn']} {record['api_name']} #{record['correlation_id']}"
            yield Problem(p["what"], f"{where} → {p.get('path') or ''}", p.get("offset"),
                          p.get("severity", WARNING), p.get("check"))


def read_live(bootstrap: str, group: str | None = None, *, timeout: float = 15.0) -> GroupsView:
    try:
        with Cluster(bootstrap, timeout=timeout) as cluster:
            return cluster.describe(group)
    except LiveError as e:
        raise SourceUnreadable(str(e)) from None


# -- helpers -------------------------------------------------------------------------------------

def _replay_partition(directory: Path, group: str | None, history: bool,
                      limits: Limits = DEFAULT_LIMITS) -> GroupsView:
    replay = OffsetsReplay(group=group, history=history, coordinator=directory.name)
    try:
        logs, skipped = logdir.segments(directory)
    except OSError as e:
        raise SourceUnreadable(f"{directory}: {e.strerror or e}") from None
    for path in logs:
        _replay_file(replay, path, limits)
    view = replay.finish()
    for path in skipped:
        view.problems.append(Problem(f"{path.name} is renamed for deletion or compaction: the "
                                     f"broker does not load it, so neither does the replay",
                                     str(path), None, INFO, "renamed_segment"))
    return view


def _replay_file(replay: OffsetsReplay, path: Path, limits: Limits = DEFAULT_LIMITS) -> None:
    cap = ProblemCap(replay.problems, keep=50)  # a file of a million damaged batches: counted
    try:
        with mapped(path) as buf:
            for kind, item, problems in walk_segment(buf, str(path), max_output=limits):
                for problem in problems:
                    if problem.severity != INFO:
                        cap.append(problem)
                if kind == "batch":
                    replay.batch(item, str(path))
        cap.close(str(path), None)
    except OSError as e:
        raise SourceUnreadable(f"{path}: {e.strerror or e}") from None


def _search_all(held: dict[int, Path], group: str, history: bool, limits: Limits, skip: int):
    for number, directory in held.items():
        if number == skip:
            continue
        replayed = _replay_partition(directory, group, history, limits)
        if group in replayed.groups:
            return number, replayed
    return None


def _merge(view: GroupsView, part: GroupsView) -> None:
    for group_id, group in part.groups.items():
        if group_id in view.groups:
            view.notes.append(f"group {group_id} appears in both "
                              f"{view.groups[group_id].coordinator} and {group.coordinator}: "
                              f"the latter is shown")
        view.groups[group_id] = group
    view.history += part.history
    view.notes += part.notes
    view.problems += part.problems
    view.log_end_offsets.update(part.log_end_offsets)
    view.topic_names.update(part.topic_names)


def _annotate_from_log_dir(view: GroupsView, log_dir: Path) -> None:
    """Topic names for consumer groups' topic ids, and log end offsets, from the log dir."""
    ids = {t for g in view.groups.values() for m in g.members.values()
           for t, _ in (m.assignment or []) + (m.target_assignment or [])}
    if ids:
        view.topic_names.update(logdir.topic_names(log_dir))
    wanted = {tp for g in view.groups.values() for tp in g.offsets}
    wanted |= {(view.topic_names.get(t, t), p) for g in view.groups.values()
               for m in g.members.values() for t, p in m.assignment}
    for topic, partition in wanted:
        directory = log_dir / f"{topic}-{partition}"
        if directory.is_dir():
            end = logdir.log_end_offset(directory)
            if end is not None:
                view.log_end_offsets[(topic, partition)] = end


def _is_offsets_dir(directory: Path) -> bool:
    return files.describe(directory / "x").topic == OFFSETS_TOPIC
