"""Work units for `kinspect spark`, planned on the driver: pure Python, no Spark.

- Inputs (files, directories, globs) are listed with their sizes.
- Units go largest first, since Spark launches lower task indices first.
- Small files are packed into units of about ``target`` bytes.
- A file larger than ``factor`` times the median (or any file bigger than ``target`` when there
  are fewer files than cores) is split into K shards. Every shard reads the whole file and
  decodes only its own connections (pipeline.DecodeRun's ``flows``); job.py checks that the
  shards' rows together are one process's rows (kinspect.shards), and where they might not be,
  decodes the file again with each exchange dealt to one shard (``Shard``).
"""

from __future__ import annotations

import glob
import math
import os
import statistics
import zlib
from dataclasses import dataclass

TARGET_BYTES = 256 << 20  # work per task when packing small files
SPLIT_FACTOR = 4  # a file this many times the median size is split
EXCHANGE_COST = 2048  # what decoding an exchange costs beyond its bytes, in bytes' worth


@dataclass(frozen=True)
class Input:
    path: str
    size: int


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
    """An argument named nothing: a missing path, or a glob that matched no file."""


def list_inputs(args: list[str]) -> list[Input]:
    """Files named by ``args`` (files, directories walked recursively, globs), with sizes; each
    file once, in the order first named. NoInputs names the first argument that matched nothing."""
    seen: dict[str, Input] = {}
    for arg in args:
        if os.path.isdir(arg):
            paths = sorted(os.path.join(root, name) for root, dirs, names in os.walk(arg)
                           for name in names if not name.startswith("."))
        elif os.path.exists(arg):
            paths = [arg]
        else:
            paths = sorted(p for p in glob.glob(arg, recursive=True) if os.path.isfile(p))
        if not paths:
            raise NoInputs(f"{arg}: no such file, directory, or matching file")
        for path in paths:
            path = os.path.abspath(path)
            if path not in seen:
                seen[path] = Input(path, os.path.getsize(path))
    return list(seen.values())


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
    """First-fit decreasing into bins of ``target`` bytes (a bin holds at least one file)."""
    bins: list[list] = []  # [bytes, files]
    for f in sorted(files, key=lambda f: f.size, reverse=True):
        for b in bins:
            if b[0] + f.size <= target:
                b[0] += f.size
                b[1].append(f)
                break
        else:
            bins.append([f.size, [f]])
    return [Unit(tuple(b[1])) for b in bins]


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
