"""A broker's log dir read for the doctor: __transaction_state's records, every partition's
batch headers (control records named) and newest producer snapshot, fed to the join in
transactions_logdir. Files are read through mmap, never written."""

from __future__ import annotations

from pathlib import Path

from kinspect.doctor.options import DEFAULTS, Thresholds
from kinspect.doctor.transactions_logdir import TransactionsJoin
from kinspect.groups.logdir import segments
from kinspect.limits import Limits
from kinspect.problems import INFO, Problem, ProblemCap
from kinspect.storage import files
from kinspect.storage.dump import DumpOptions, dump_file
from kinspect.storage.mapped import mapped
from kinspect.storage.snapshot import decode_snapshot

TRANSACTIONS_TOPIC = "__transaction_state"
SKIPPED_TOPICS = frozenset({"__cluster_metadata", "__consumer_offsets", "__share_group_state"})


class LogDirUnreadable(Exception):
    """Not a directory, or nothing in it a broker would have written."""


def read_transactions(log_dir: Path, thresholds: Thresholds = DEFAULTS, limits: Limits | None = None):
    """(findings, notices, problems) about transactions in ``log_dir``."""
    if not log_dir.is_dir():
        raise LogDirUnreadable(f"{log_dir}: not a directory")
    join = TransactionsJoin(thresholds)
    problems: list[Problem] = []
    cap = ProblemCap(problems, keep=50)
    partitions = []
    try:
        entries = sorted(log_dir.iterdir())
    except OSError as e:
        raise LogDirUnreadable(f"{log_dir}: {e.strerror or e}") from None
    for path in entries:
        info = files.describe(path / "x")
        if path.is_dir() and info.topic is not None and info.partition is not None \
                and info.directory_state is None and info.topic not in SKIPPED_TOPICS:
            partitions.append((info.topic, info.partition, path))
    if not partitions:
        raise LogDirUnreadable(f"{log_dir}: no partition directories (topic-N): not a Kafka log dir")
    options = DumpOptions(records=True, data=True, checks=False, limits=limits)
    headers = DumpOptions(checks=False, limits=limits)
    for topic, partition, directory in partitions:
        internal = topic == TRANSACTIONS_TOPIC
        try:
            logs, _ = segments(directory)
            for log in logs:
                with mapped(log) as buf:
                    for event in dump_file(str(log), buf, files.describe(log), options if internal else headers,
                                           lambda suffix: None):
                        if event["type"] == "batch":
                            if internal:
                                for record in event.get("records") or ():
                                    join.transaction_record(record.get("decoded") or {})
                            else:
                                join.batch(topic, partition, event, str(log))
                        for problem in event.get("problems") or ():
                            if problem.get("severity") != INFO:
                                cap.append(Problem(problem.get("what", ""), str(log), problem.get("offset"),
                                                   problem.get("severity"), problem.get("check")))
            if not internal:
                _snapshot(join, topic, partition, directory, logs, cap)
        except OSError as e:
            cap.append(Problem(f"cannot read: {e.strerror or e}", str(directory), None, "warning", "unreadable"))
    cap.close(str(log_dir), None)
    notices = [n for b in join.bounded if (n := b.notice("hanging_transaction")) is not None]
    return list(join.finish()), notices, problems


def _snapshot(join: TransactionsJoin, topic, partition, directory: Path, logs: list[Path], cap) -> None:
    snapshots = sorted((p for p in directory.iterdir() if files.describe(p).kind == "producer_snapshot"),
                       key=lambda p: files.describe(p).base_offset or 0)
    if not snapshots:
        return
    newest = snapshots[-1]
    with mapped(newest) as buf:
        decoded, problems = decode_snapshot(buf, str(newest))
    for problem in problems:
        cap.append(problem)
    first_logged = files.describe(logs[0]).base_offset if logs else None
    join.snapshot(topic, partition, files.describe(newest).base_offset, decoded.get("producers") or [],
                  str(newest), first_logged)
