"""Decoding: the source seam (pipeline.py), finishing exchanges on worker processes
(parallel.py), the user's filters (filters.py), the summary (summary.py) and the checks on a
split run (shards.py)."""
