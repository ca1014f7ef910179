"""Records: v2 record batches, legacy v0/v1 message sets, codecs and integrity checks."""

from kinspect.records.recordset import decode_records, iter_batches

__all__ = ["decode_records", "iter_batches"]
