"""kinspect offsets: committed offsets and group state from __consumer_offsets."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kinspect.cli.keylog import keylog_option, keylog_warnings
from kinspect.cli.limits import limit_options
from kinspect.cli.options import show_secrets_option
from kinspect.cli.output import Output, output_options
from kinspect.cli.overlap import refuse_writing_over_inputs
from kinspect.inputs import Tally, readable, walk
from kinspect.storage import files
from kinspect.groups import describe
from kinspect.groups.partition import DEFAULT_PARTITIONS, java_string_hash, partition_for
from kinspect.groups.sources import (SourceUnreadable, read_capture, read_live, read_log_dir,
                                     read_segments)
from kinspect.limits import Limits
from kinspect.problems import ERROR, EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE
from kinspect.render.safe import escape, path_text, text_of

EPILOG = """\b
Examples:
  kinspect offsets my-app --log-dir /var/lib/kafka/data
  kinspect offsets --log-dir /var/lib/kafka/data                 every group, with its state
  kinspect offsets my-app __consumer_offsets-12/*.log --history  segment files, every commit
  kinspect offsets my-app --capture traffic.pcapng --members
  kinspect offsets my-app --bootstrap localhost:9092 --state
  kinspect offsets --json --log-dir data/ --all-groups | jq 'select(.lag > 0)'
  kinspect offsets partition-for my-app --partitions 50

\b
Sources (exactly one): --log-dir DIR (a broker's data directory: kinspect replays the
__consumer_offsets-N partition that holds GROUP and says which; a DIR given after GROUP is
read the same way), segment FILEs of __consumer_offsets (or a __consumer_offsets-N
directory) given after GROUP, --capture FILE (OffsetCommit, TxnOffsetCommit, EndTxn,
OffsetFetch ... exchanges; a commit the broker rejected is not a commit), --bootstrap
HOST:PORT (a live broker: FindCoordinator, OffsetFetch, ListOffsets, DescribeGroups).
Replay follows the broker: offset order, last write per key wins, tombstones delete,
transactional commits count only after their COMMIT marker and vanish on ABORT.

\b
Exit codes: 0 fine; 1 damaged data found, or GROUP not found; 2 usage error;
3 a source unreadable (no such dir or file, not a capture, broker unreachable);
4 kinspect could not finish (an internal error); 130 interrupted.
"""


class _OffsetsGroup(click.Group):
    """`kinspect offsets [GROUP] ...` runs `show`; `kinspect offsets partition-for ...` too."""

    def parse_args(self, ctx, args):
        if args and args[0] in ("-h", "--help"):
            return super().parse_args(ctx, args)
        if not args or args[0] not in self.commands:
            args = ["show", *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx, formatter):
        formatter.write_usage(ctx.command_path,
                              "[GROUP] [SEGMENT...] [OPTIONS] | partition-for GROUP")

    def format_options(self, ctx, formatter):
        """`kinspect offsets --help` lists show's options (what `kinspect offsets ...` runs)."""
        show_command = self.commands["show"]
        show_command.format_options(click.Context(show_command, info_name="show", parent=ctx), formatter)
        self.format_commands(ctx, formatter)


@click.group(cls=_OffsetsGroup, epilog=EPILOG)
def offsets():
    """Committed offsets, members and state of consumer groups, from __consumer_offsets.

    `kinspect offsets [GROUP] --log-dir DIR` (or segment files, --capture, --bootstrap) shows
    a table like kafka-consumer-groups --describe; without GROUP, every group found.
    kafka-consumer-groups' --group, --describe, --list and --bootstrap-server are taken too.
    """


@offsets.command(epilog=EPILOG)
@click.argument("args", nargs=-1, metavar="[GROUP] [SEGMENT...]")
@click.option("--log-dir", type=click.Path(path_type=Path), help="A broker's data directory.")
@click.option("--capture", help="A pcap/pcapng capture (file, .gz or -).")
@click.option("--bootstrap", "--bootstrap-server", "bootstrap", help="A live broker, HOST:PORT.")
@click.option("--group", "group_option", metavar="GROUP",
              help="The group, as kafka-consumer-groups takes it (the same as GROUP).")
@click.option("--describe", "describe_all", is_flag=True,
              help="As kafka-consumer-groups --describe: the offsets of GROUP (of every group without one).")
@click.option("--list", "list_groups", is_flag=True,
              help="As kafka-consumer-groups --list: the groups found, with their state.")
@click.option("--partitions", type=click.IntRange(1), default=None,
              help=f"Partitions of __consumer_offsets (offsets.topic.num.partitions; "
                   f"default {DEFAULT_PARTITIONS}) to find GROUP's partition in --log-dir.")
@click.option("--members", is_flag=True, help="Members: id, host, client id, assignment.")
@click.option("--state", is_flag=True, help="State, type, assignor, epoch, member count.")
@click.option("--history", is_flag=True, help="Every commit in order, with its outcome, time "
                                              "and the batch (or connection) it came from.")
@click.option("--all-groups", is_flag=True,
              help="Without GROUP: every group's offsets, not the list of groups.")
@click.option("--port", "ports", type=click.IntRange(1, 65535), multiple=True,
              help="--capture: a broker port besides 9092 (repeatable).")
@click.option("--timeout", type=float, default=15.0, show_default=True,
              help="--bootstrap: seconds to wait for the broker.")
@show_secrets_option(scope="--capture")
@keylog_option()
@limit_options
@output_options
def show(args, log_dir, capture, bootstrap, group_option, describe_all, list_groups, partitions, members, state,
         history, all_groups, ports, timeout, show_secrets, keylog, out: Output, limits: Limits):
    """Committed offsets of GROUP (or of every group): log dir, segments, capture or broker."""
    group, segments = _split_args(args)
    if group_option is not None:
        if group is not None and group != group_option:
            raise click.UsageError(f"two groups: {group!r} and --group {group_option!r}")
        group = group_option
    if list_groups and (group is not None or describe_all or all_groups):
        raise click.UsageError("--list shows every group: not with GROUP, --describe or --all-groups")
    all_groups = all_groups or (describe_all and group is None)
    if log_dir is None and len(segments) == 1 and segments[0].is_dir() \
            and not segments[0].name.startswith("__consumer_offsets-"):
        log_dir, segments = segments[0], []
    segments = _expand(segments, out)
    chosen = [name for name, given in (("--log-dir", log_dir), ("segment files", segments),
                                       ("--capture", capture), ("--bootstrap", bootstrap)) if given]
    if len(chosen) != 1:
        raise click.UsageError("give one source: --log-dir DIR, segment files, --capture FILE "
                               "or --bootstrap HOST:PORT" + (f" (not {' and '.join(chosen)})"
                                                            if chosen else ""))
    refuse_writing_over_inputs([log_dir, *segments, capture, *(keylog.paths if keylog is not None else ())],
                               reads=lambda path: files.describe(path).kind is not None)
    if keylog is not None and not capture:
        raise click.UsageError("--keylog goes with --capture FILE")
    for line in keylog_warnings(keylog):
        out.warn(line)
    try:
        if log_dir is not None:
            view = read_log_dir(log_dir, group, partitions=partitions, history=history, limits=limits)
        elif segments:
            view = read_segments(segments, group, history=history, limits=limits)
        elif capture:
            view = read_capture(capture, group, history=history,
                                ports=set(ports) | {9092} if ports else None, show_secrets=show_secrets,
                                limits=limits, keylog=keylog)
        else:
            view = read_live(bootstrap, group, timeout=timeout)
    except SourceUnreadable as e:
        out.warn(f"kinspect: {e}")
        sys.exit(EXIT_UNREADABLE)
    exit_code = _notices(out, view)
    if group is not None:
        found = view.groups.get(group)
        if found is None:
            out.warn(f"kinspect: group {group!r} not found")
            sys.exit(EXIT_PROBLEMS)
        if not found.exists:
            out.warn(f"kinspect: group {group!r} was deleted (state Dead): --history shows "
                     f"what it committed")
        _show_groups(out, view, [found], members, state, history,
                     offsets=not (members or state or history))
    elif all_groups or members or state:
        _show_groups(out, view, describe.listed_groups(view, include_deleted=False), members,
                     state, history, offsets=all_groups)
    elif history:
        _history(out, describe.history_rows(view))
    else:
        _list(out, view)
    sys.exit(exit_code)


PARTITION_FOR_EPILOG = """\b
Examples:
  kinspect offsets partition-for my-app                   the partition of 50 that holds my-app
  kinspect offsets partition-for my-app other --partitions 200
  kinspect offsets partition-for --json my-app | jq .partition

\b
Exit codes: 0 fine; 2 usage error.
"""


@offsets.command("partition-for", epilog=PARTITION_FOR_EPILOG)
@click.argument("groups", nargs=-1, required=True, metavar="GROUP...")
@click.option("--partitions", type=click.IntRange(1), default=DEFAULT_PARTITIONS,
              show_default=True, help="Partitions of __consumer_offsets.")
@output_options
def partition_for_command(groups, partitions, out: Output):
    """The __consumer_offsets partition of each GROUP: abs(Java String.hashCode) % N.

    Java's arithmetic: UTF-16 code units, int32 wraparound, and Kafka's abs(MIN_VALUE) = 0.
    """
    for group in groups:
        row = {"type": "partition_for", "group": group, "hash_code": java_string_hash(group),
               "partitions": partitions, "partition": partition_for(group, partitions)}
        if out.as_json:
            out.record(row)
        else:
            out.text(f"{escape(group)}\t__consumer_offsets-{row['partition']}\t(hashCode "
                     f"{row['hash_code']}, {partitions} partitions)")
    sys.exit(EXIT_OK)


# -- helpers ---------------------------------------------------------------------------------

def _split_args(args) -> tuple[str | None, list[Path]]:
    """GROUP is the one argument that is not an existing file or directory."""
    group, paths = None, []
    for arg in args:
        path = Path(arg)
        if path.exists():
            paths.append(path)
        elif group is None:
            group = arg
        else:
            raise click.UsageError(f"{arg}: no such file (the group is {group!r})")
    return group, paths


def _expand(paths: list[Path], out: Output) -> list[Path]:
    """Segment files as given; a directory (a __consumer_offsets-N partition) stands for the .log
    segments found in it (inputs.walk: what is skipped is counted, what cannot be read ends the run
    with exit 3)."""
    found, tally = [], Tally()
    for entry in walk(paths, _segment, unrecognised="not a .log segment"):
        tally.add(entry)
        if entry.unreadable is not None:
            out.warn(f"kinspect: {path_text(entry.path)}: {entry.unreadable}")
            sys.exit(EXIT_UNREADABLE)
        if entry.skipped is None:
            found.append(entry.path)
        elif entry.named:
            out.warn(f"kinspect: {path_text(entry.path)}: {entry.skipped}: name segment files")
            sys.exit(EXIT_UNREADABLE)
    if paths and not found:
        out.warn(f"kinspect: no segment in {', '.join(path_text(p) for p in paths)}"
                 + (f": {tally.skipped_line()}" if tally.skipped_line() else ""))
        sys.exit(EXIT_UNREADABLE)
    if tally.skipped_line():
        out.warn(f"kinspect: {tally.skipped_line()}")
    return found


def _segment(path: Path, named: bool) -> str | None:
    readable(path)
    return "log" if named or files.describe(path).kind == "log" else None


def _notices(out: Output, view) -> int:
    exit_code = EXIT_OK
    for note in view.notes:
        out.notice({"type": "notice", "kind": "note", "what": note})
    for problem in view.problems:
        if problem.severity == ERROR:
            exit_code = EXIT_PROBLEMS
        out.notice({"type": "notice", "kind": "problem", **problem.to_dict()},
                   f"kinspect: {problem.severity}: {problem}")
    return exit_code


def _show_groups(out, view, groups, members, state, history, offsets) -> None:
    for group in groups:
        name = text_of(group.group_id)
        if state:
            _rows(out, f"{name}: state", [describe.state_row(group)], describe.STATE_COLUMNS)
        if offsets:
            _rows(out, f"{name}: offsets", describe.offset_rows(view, group),
                  describe.OFFSET_COLUMNS)
        if members:
            _rows(out, f"{name}: members", describe.member_rows(view, group),
                  describe.MEMBER_COLUMNS)
        if history:
            _history(out, describe.history_rows(view, group.group_id))


def _history(out, rows) -> None:
    _rows(out, "commit history", rows, describe.HISTORY_COLUMNS)


def _list(out, view) -> None:
    rows = [describe.state_row(g) for g in describe.listed_groups(view)]
    _rows(out, "groups", rows, describe.LIST_COLUMNS)


def _rows(out: Output, title: str, rows: list[dict], columns: list[str]) -> None:
    headers = [c.upper().replace("_", "-") for c in columns]
    out.rows(title, rows, headers, cells=lambda r: {h: _cell(r.get(c)) for h, c in zip(headers, columns)})


def _cell(value):
    if isinstance(value, dict):  # an assignment, written as kafka-consumer-groups does
        return ";".join(f"{text_of(t)}:{','.join(map(str, ps))}" for t, ps in value.items()) or None
    if isinstance(value, list):
        return ",".join(map(str, value)) if value else None
    if value == "":
        return None
    return value
