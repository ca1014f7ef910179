"""Decoding: the source seam's one pipeline (pipeline.py), the one finishing step (finish.py),
finishing on worker processes (parallel.py), the user's filters (filters.py), the summary
(summary.py) and the checks on a split run (shards.py)."""
