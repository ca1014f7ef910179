"""The live adapters' one loop (sniff, the proxy's decoder): every record of a live run finished
by decode/finish.py, counted in LiveStats for the dashboard and the metrics endpoint, and handed
to the caller's ``emit`` as it comes. What ``emit`` does with it (lines, JSON, the summary's
totals) is the caller's; nothing here knows the CLI.
"""

from __future__ import annotations

from typing import Callable

from kinspect.decode.finish import RECORD, Finish, every
from kinspect.live.stats import LiveStats


class LiveLoop:
    """A live run's figures and what shows them: ``stats``, the dashboard (``dashboard()``), shown
    while the loop is entered (a context manager), and the metrics endpoint (``serve_metrics()``),
    stopped when it is left."""

    def __init__(self, stats: LiveStats | None = None):
        self.stats = stats if stats is not None else LiveStats()
        self.board = None
        self.server = None

    def serve_metrics(self, port: int, address: str = "") -> None:
        """The figures for Prometheus on ``port``: ImportError without prometheus_client, OSError
        when the port cannot be bound (the caller says what to do)."""
        from kinspect.live.metrics import serve

        self.server = serve(self.stats, port, address)

    def dashboard(self, console, title: str):
        from kinspect.live.dashboard import Dashboard

        self.board = Dashboard(self.stats, console, title=title)
        return self.board

    def refresh(self) -> None:
        """On a tick: the dashboard redrawn, if there is one."""
        if self.board is not None:
            self.board.refresh()

    def __enter__(self) -> LiveLoop:
        if self.board is not None:
            self.board.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.board is not None:
                self.board.__exit__(None, None, None)
        finally:
            if self.server is not None:
                self.server.shutdown()

    def run(self, run, emit: Callable[[object], None], *, keep: Callable[[dict], bool] = every,
            mode: str = RECORD, count: int | None = None, before: Callable[[dict], None] | None = None,
            stages: tuple = ()) -> bool:
        """Every record of a DecodeRun over a live source: ``before(record)`` if given, finished
        (Finish: ``keep``, ``mode``, ``stages``), counted, and its output (when kept) given to
        ``emit``; until the source ends, or ``count`` exchanges were emitted. Whether any record
        had an error problem."""
        finish = Finish(run.topics, run.limits, keep=keep, mode=mode, stages=stages)
        one = finish.record
        add = self.stats.add
        any_problems = False
        shown = 0
        for record in run.raw_records():
            if before is not None:
                before(record)
            output, error = one(record)
            add(record)
            any_problems |= error
            if output is None:
                continue
            emit(output)
            if record.get("type") == "exchange":
                shown += 1
                if count is not None and shown >= count:
                    break
        return any_problems
