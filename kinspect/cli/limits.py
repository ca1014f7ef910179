"""The options that set kinspect.limits' bounds, shared by every command that decodes records."""

from __future__ import annotations

import functools

import click

from kinspect.limits import DEFAULT_LIMITS, Limits

_D = DEFAULT_LIMITS


def limit_options(command):
    """Adds the bound options and hands the command ``limits: Limits``."""
    options = [
        click.option("--max-items", type=click.IntRange(1), default=_D.max_items, show_default=True,
                     help="Array entries decoded per request or response body; past it the body is cut."),
        click.option("--max-records", type=click.IntRange(1), default=_D.eager_records, show_default=True,
                     help="Records held in memory at once; bigger batches are streamed to the output."),
        click.option("--max-batch-bytes", type=click.IntRange(1024), default=_D.max_batch_bytes,
                     show_default=True, help="Bytes one compressed batch may decompress to."),
        click.option("--max-ratio", type=click.IntRange(1), default=_D.max_ratio, show_default=True,
                     help="Decompressed bytes per compressed byte, per batch (at least 1 MiB a batch)."),
        click.option("--max-file-ratio", type=click.IntRange(1), default=_D.max_file_ratio,
                     show_default=True,
                     help="Decompressed bytes per input byte, per file (after the first --max-batch-bytes)."),
        click.option("--max-records-per-byte", type=click.IntRange(0), default=_D.max_records_per_byte,
                     show_default=True,
                     help="Records decoded per input byte, per file (after the first 100,000); "
                          "past it a batch's remaining records are cut."),
    ]

    @functools.wraps(command)
    def wrapped(*args, max_items, max_records, max_batch_bytes, max_ratio, max_file_ratio,
                max_records_per_byte, **kwargs):
        limits = Limits(max_items=max_items, max_batch_bytes=max_batch_bytes, max_ratio=max_ratio,
                        max_file_ratio=max_file_ratio, eager_records=max_records,
                        max_records_per_byte=max_records_per_byte)
        return command(*args, limits=limits, **kwargs)

    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped
