"""A capture's finished exchanges, through the one finishing step that decode uses (bodies
decoded, topic ids named, secrets redacted; record batches packed where they can be)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kinspect.decode.finish import RECORD, every
from kinspect.decode.parallel import run_outputs


def capture_records(run, progress: Callable[[int], None] | None = None,
                    capture: str | None = None, stages: tuple = ()) -> Iterator[dict]:
    """Every record of a pipeline.DecodeRun, finished, in order; with ``capture``, exchanges
    carry it (findings' evidence names the file). ``stages``: the finishing step's more stages
    (schema-aware values: schemas/stage.py)."""
    for output, _ in run_outputs(run, every, RECORD, 1, progress, stages=stages):
        if output is not None:
            if capture is not None:
                output["capture"] = capture
            yield output
