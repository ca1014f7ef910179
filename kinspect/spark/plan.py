"""Work units for `kinspect spark`, planned on the driver: pure Python, no Spark.

- Inputs (files, directories, globs) are listed with their sizes.
- Units go largest first, since Spark launches lower task indices first.
- Small files are packed into units of about ``target`` bytes.
- A file larger than ``factor`` times the median (or any file bigger than ``target`` when there
  are fewer files than cores) is split into K shards. Every shard reads the whole file and
  decodes only its own connections (pipeline.DecodeRun's ``flows``); job.py checks that the
  shards' rows together are one process's rows (kinspect.decode.shards), and where they might not be,
  decodes the file again with each exchange dealt to one shard (``Shard``).
"""

from __future__ import annotations

import glob
import math
import os
import stat
import statistics
import zlib
from dataclasses import dataclass

from kinspect.capture.source import sniff_format

TARGET_BYTES = 256 << 20  # work per task when packing small files
SPLIT_FACTOR = 4  # a file this many times the median size is split
EXCHANGE_COST = 2048  # what decoding an exchange costs beyond its bytes, in bytes' worth


@dataclass(frozen=True)
class Input:
    path: str
    size: int
    error: str | None = None  # why it cannot be read (a link loop, say): its files row says so, nothing is decoded


@dataclass
class Listing:
    """What the inputs named: the files to decode, and the special files (FIFOs, sockets,
    devices, links to directories) the walks passed over, as (path, what it is)."""
    inputs: list[Input]
    skipped: list[tuple[str, str]]


@dataclass(frozen=True)
class Unit:
    """One Spark task: whole files, or shard ``shard`` of ``shards`` of a single file."""
    files: tuple[Input, ...]
    shard: int = 0
    shards: int = 1

    @property
    def weight(self) -> int:
        """Bytes this unit decodes (a shard decodes its share of its file)."""
        return sum(f.size for f in self.files) // self.shards


class NoInputs(Exception):
    """An argument named nothing to decode: a missing path, a glob that matched no file, or a
    special file (a FIFO would never end)."""


# what a special file is, by its stat mode
SPECIAL = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
           (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def special_kind(mode: int) -> str:
    """What a file of stat mode ``mode`` is, when it is no regular file ("a FIFO"); else ""."""
    return next((kind for test, kind in SPECIAL if test(mode)), "" if stat.S_ISREG(mode) else "not a regular file")


def find_inputs(args: list[str]) -> Listing:
    """Files named by ``args`` (files, directories walked recursively, globs), with sizes; each
    file once, in the order first named. A walk or glob passes over special files (skipped) and
    hidden ones; an entry it cannot read (a link loop, a directory it may not enter) is an Input
    with its error. NoInputs names the first argument that matched nothing, or a special file
    named as an input."""
    seen: dict[str, Input] = {}
    skipped: list[tuple[str, str]] = []
    for arg in args:
        passed_over = len(skipped)
        if os.path.isdir(arg):
            found = _walk(arg, skipped)
        elif os.path.lexists(arg):
            found = [_entry(arg)]
            if isinstance(found[0], str):
                raise NoInputs(f"{arg}: {found[0]}, not a regular file: name capture files or directories")
        else:
            found = []
            for path in sorted(glob.glob(arg, recursive=True)):
                if os.path.isdir(path):
                    continue  # a glob names files
                entry = _entry(path)
                if isinstance(entry, str):
                    skipped.append((os.path.abspath(path), entry))
                else:
                    found.append(entry)
        if not found and len(skipped) > passed_over:
            reasons = ", ".join(sorted({why for _, why in skipped[passed_over:]}))
            raise NoInputs(f"{arg}: no capture, only files skipped ({reasons})")
        if not found:
            raise NoInputs(f"{arg}: " + ("a directory holding no file" if os.path.isdir(arg)
                                          else "no such file, directory, or matching file"))
        for entry in found:
            if entry.path not in seen:
                seen[entry.path] = entry
    return Listing(list(seen.values()), skipped)


def searched_directory(arg: str) -> str | None:
    """The directory an input argument reads: itself when it is a directory, the part of a glob
    before its first wildcard ("captures/*/x.pcap": captures), else None."""
    if os.path.isdir(arg):
        return arg
    if os.path.lexists(arg) or not glob.has_magic(arg):
        return None
    fixed = []
    for part in arg.split(os.sep):
        if glob.has_magic(part):
            break
        fixed.append(part)
    return os.sep.join(fixed) or (os.sep if arg.startswith(os.sep) else os.curdir)


def list_inputs(args: list[str]) -> list[Input]:
    """find_inputs' files."""
    return find_inputs(args).inputs


def _entry(path: str) -> Input | str:
    """The Input of ``path`` (links followed), or what it is when it is a special file."""
    path = os.path.abspath(path)
    try:
        st = os.stat(path)
    except OSError as e:  # a link loop, a dangling link, a file gone meanwhile
        return Input(path, 0, f"cannot read: {e.strerror or e}")
    kind = special_kind(st.st_mode)
    return kind if kind else Input(path, st.st_size)


def _is_capture(path: str) -> bool:
    """Whether the file starts as a pcap, a pcapng or a gzip file does (one that cannot be read
    is kept: its files row says why)."""
    try:
        with open(path, "rb") as f:
            return sniff_format(f.read(4)) is not None
    except OSError:
        return True


def _walk(top: str, skipped: list) -> list[Input]:
    """Every file under ``top`` but hidden ones; special files go to ``skipped``; a directory that
    cannot be listed is an Input with its error. Links to directories are not followed (a loop
    would never end): they are skipped too. No recursion: a directory nested thousands deep
    ended os.walk (RecursionError)."""
    found: list[Input] = []
    pending = [top]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError as e:
            found.append(Input(os.path.abspath(directory), 0, f"cannot list: {e.strerror or e}"))
            continue
        for entry in entries:
            path = os.path.join(directory, entry.name)
            try:
                real_directory = entry.is_dir(follow_symlinks=False)
            except OSError:  # gone meanwhile, or no d_type and no right to stat it
                real_directory = False
            if real_directory:
                pending.append(path)
            elif entry.is_symlink() and os.path.isdir(path):
                skipped.append((os.path.abspath(path), "a link to a directory"))
            elif not entry.name.startswith("."):
                listed = _entry(path)
                if isinstance(listed, str):
                    skipped.append((os.path.abspath(path), listed))
                elif listed.error is None and not _is_capture(listed.path):
                    skipped.append((listed.path, "not a capture"))  # found, not named: recognised by content
                else:
                    found.append(listed)
    return sorted(found, key=lambda f: f.path)


def plan(inputs: list[Input], cores: int, target: int = TARGET_BYTES, factor: float = SPLIT_FACTOR) -> list[Unit]:
    """Units, largest first. ``cores``: the parallelism the job will have."""
    if not inputs:
        return []
    median = statistics.median(f.size for f in inputs)
    few = len(inputs) < cores
    units: list[Unit] = []
    small: list[Input] = []
    for f in inputs:
        shards = 1
        if f.size > target and cores > 1 and (f.size > factor * median or few):
            shards = min(cores, math.ceil(f.size / target))
        if shards > 1:
            units.extend(Unit((f,), shard, shards) for shard in range(shards))
        elif f.size >= target:
            units.append(Unit((f,)))
        else:
            small.append(f)
    units.extend(_pack(small, target))
    units.sort(key=lambda u: u.weight, reverse=True)  # stable: shards of a file stay in order
    return units


def _pack(files: list[Input], target: int) -> list[Unit]:
    """First-fit decreasing into bins of ``target`` bytes (a bin holds at least one file). The
    first bin with room is found in a tree of the bins' room (the most room below each node), so
    packing n files takes n log n steps: a scan of the bins took 13 s for 20,000 files that fill
    one bin each (--task-mb 1 over files of 600 KB, or sparse files), and hours for 1M."""
    order = sorted(files, key=lambda f: f.size, reverse=True)
    leaves = 1
    while leaves < len(order):
        leaves *= 2
    room = [target] * (2 * leaves)  # room[1]: the root; bin i is leaf leaves + i (unused: empty)
    bins: list[list[Input]] = []
    for f in order:  # every small file is below target: an empty bin always has room
        node = 1
        while node < leaves:
            node = 2 * node if room[2 * node] >= f.size else 2 * node + 1
        i = node - leaves
        if i == len(bins):
            bins.append([])
        bins[i].append(f)
        room[node] -= f.size
        while node > 1:
            node //= 2
            room[node] = max(room[2 * node], room[2 * node + 1])
    return [Unit(tuple(b)) for b in bins]


def connection_shard(conn: str, shards: int) -> int:
    """The shard of a connection label ("client:port-server:port"): the same for both of its
    directions, whichever side is named first, and the same in every process (CRC-32, not
    Python's salted hash). Records of no connection ("") are shard 0's."""
    if shards <= 1 or not conn:
        return 0
    ends = sorted(conn.split("-", 1))
    return zlib.crc32("|".join(ends).encode()) % shards


class Shard:
    """``keep_record`` (pipeline.DecodeRun) of shard ``shard`` of ``shards`` over one file.

    Each exchange goes to the shard with the least work dealt so far (its frames' bytes plus
    EXCHANGE_COST); other records (notices) go by their connection's hash. Every shard sees the
    same records in the same order, so every shard deals alike and each record is given out by
    exactly one. Dealt by exchange, not by connection: a capture's bytes sit in a few busy
    connections (bench-1m: five producers carry 30% of the bytes over 108 connections), and a
    hash of the connections gave two shards 68% and 32% of the work."""

    __slots__ = ("shard", "shards", "dealt")

    def __init__(self, shard: int, shards: int):
        self.shard, self.shards = shard, shards
        self.dealt = [0] * shards

    def __call__(self, record: dict) -> bool:
        if record["type"] != "exchange":
            return connection_shard(record.get("conn", ""), self.shards) == self.shard
        dealt = self.dealt
        to = dealt.index(min(dealt))
        dealt[to] += (record.get("request_size") or 0) + (record.get("response_size") or 0) + EXCHANGE_COST
        return to == self.shard
