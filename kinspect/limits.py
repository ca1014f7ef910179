"""Bounds that keep memory and work constant whatever the input, and the budget they draw on.

A hostile input of a few kilobytes can claim millions of records, arrays of millions of
entries, or gigabytes of decompressed output. Each bound below caps one of these; when a bound
cuts something, the problem reported names the option that raises it.

One ``Budget`` serves one unit of work whose output is written before the next is decoded: an
exchange, a chunk of exchanges in a worker, or a segment file. Decompression is granted in
proportion to the input bytes the unit has been given (``grant``), so work stays linear in the
input; records beyond ``eager_records`` are not held in memory but streamed to the output.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class Limits:
    max_items: int = 200_000          # array entries decoded per body (--max-items)
    max_batch_bytes: int = 64 * MiB   # decompressed bytes per batch (--max-batch-bytes)
    max_ratio: int = 1000             # decompressed bytes per compressed byte, per batch (--max-ratio)
    max_file_ratio: int = 100         # decompressed bytes per input byte, per file (--max-file-ratio)
    eager_records: int = 100_000      # records held at once; the rest streamed (--max-records)
    max_records_per_byte: int = 2     # records decoded per input byte, per file (--max-records-per-byte)


DEFAULT_LIMITS = Limits()

# The options that raise each bound, as problems name them.
OPTION = {"max_items": "--max-items", "max_batch_bytes": "--max-batch-bytes",
          "max_ratio": "--max-ratio", "max_file_ratio": "--max-file-ratio",
          "eager_records": "--max-records", "max_records_per_byte": "--max-records-per-byte"}
RATIO_FLOOR = 1 * MiB  # any batch may decompress this much, whatever its ratio
# Any unit may decode this many records, whatever its size. Past it, a unit decodes at most
# max_records_per_byte records per input byte: honest data holds at most about one (a zstd batch
# of empty records), and each record costs output and time whatever its size.
RECORDS_FLOOR = 100_000


class Budget:
    """What is left of the bounds for one unit of work (see the module's docstring)."""

    __slots__ = ("limits", "inflate_left", "records_left", "decode_left", "pack_records", "inflate_low",
                 "decode_low")

    def __init__(self, limits: Limits = DEFAULT_LIMITS, input_bytes: int = 0,
                 pack_records: bool = False):
        """``pack_records``: regular batches may keep their records as bytes (PackedRecords),
        for an output that writes them straight from there (--json), or never shows them as
        objects (text, --summary; -v prints bodies through their JSON)."""
        self.limits = limits
        self.pack_records = pack_records
        # one whole batch is always allowed, so small inputs decompress as they always have
        self.inflate_left = limits.max_batch_bytes + limits.max_file_ratio * input_bytes
        self.records_left = limits.eager_records
        self.decode_left = RECORDS_FLOOR + limits.max_records_per_byte * input_bytes
        # the least each has been: what the unit used beyond its grants (pipeline.flows_report)
        self.inflate_low, self.decode_low = self.inflate_left, self.decode_left

    def copy(self) -> Budget:
        twin = Budget.__new__(Budget)
        twin.limits, twin.inflate_left, twin.records_left = self.limits, self.inflate_left, self.records_left
        twin.decode_left, twin.pack_records = self.decode_left, self.pack_records
        twin.inflate_low, twin.decode_low = self.inflate_low, self.decode_low
        return twin

    def grant(self, input_bytes: int) -> None:
        """More input handed to this unit earns its share of decompression."""
        self.inflate_left += self.limits.max_file_ratio * input_bytes
        self.decode_left += self.limits.max_records_per_byte * input_bytes

    def inflate_bound(self, compressed: int) -> tuple[int, str]:
        """The most a batch of ``compressed`` bytes may decompress to now, and the option that
        raises that bound."""
        limits = self.limits
        bounds = [(limits.max_batch_bytes, "max_batch_bytes"),
                  (max(RATIO_FLOOR, limits.max_ratio * compressed), "max_ratio"),
                  (max(self.inflate_left, 0), "max_file_ratio")]
        bound, name = min(bounds)
        return bound, OPTION[name]

    def inflated(self, size: int) -> None:
        self.inflate_left -= size
        if self.inflate_left < self.inflate_low:
            self.inflate_low = self.inflate_left

    def decode_allowed(self) -> int:
        """How many more records may be decoded (framed, good or bad) from this unit's input."""
        return max(self.decode_left, 0)

    def decoded(self, count: int) -> None:
        self.decode_left -= count
        if self.decode_left < self.decode_low:
            self.decode_low = self.decode_left

    def cut_note(self, decoded: int) -> str:
        """Why records past the first ``decoded`` of a batch or wrapper are not decoded."""
        per_byte = self.limits.max_records_per_byte
        return (f"records past the first {decoded} here are not decoded: the input already gave "
                f"the most records its size allows ({per_byte} per byte after the first "
                f"{RECORDS_FLOOR:,}; raise it with {OPTION['max_records_per_byte']})")

    def next_unit(self) -> None:
        """The records held so far were written out: a new unit may hold its own."""
        self.records_left = self.limits.eager_records

    def held(self, count: int) -> None:
        """``count`` records of one batch are held (the batch may pass what was left)."""
        self.records_left = max(self.records_left - count, 0)

    def hold_records(self, count: int) -> bool:
        """Whether ``count`` more records may be held in memory (and if so, they are counted)."""
        if count > self.records_left:
            return False
        self.records_left -= count
        return True
