"""The ``--live`` dashboard: rich tables over LiveStats, redrawn 4 times a second.

    with Dashboard(stats, console, title="lo (ring)") as board:
        ...
        board.refresh()   # as often as convenient: redraws at most every REFRESH seconds
"""

from __future__ import annotations

import time

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kinspect.live.stats import LiveStats
from kinspect.render.safe import escape

REFRESH = 0.25  # seconds between redraws: 4 a second
TOP = 8         # rows of the top-N tables


def _ms(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def render(stats: LiveStats, title: str = "") -> Group:
    """The dashboard's tables, from one snapshot of ``stats``."""
    snap = stats.snapshot()
    window = stats.window()
    apis = Table(title="Requests by API (last 10 s)", title_justify="left", expand=False)
    for column in ("api", "req/s", "p50 ms", "p99 ms", "total", "no response"):
        apis.add_column(column, justify="left" if column == "api" else "right")
    for api, row in sorted(window.items(), key=lambda kv: -kv[1]["rate"]):
        apis.add_row(escape(api), f"{row['rate']:.1f}", _ms(row["p50"]), _ms(row["p99"]), str(row["count"]),
                     str(snap["unanswered"].get(api, 0)))
    errors = Table(title="Errors by code", title_justify="left")
    for column in ("api", "error", "count"):
        errors.add_column(column, justify="right" if column == "count" else "left")
    for (api, code), n in sorted(snap["errors"].items(), key=lambda kv: -kv[1])[:TOP]:
        errors.add_row(escape(api), escape(code), str(n))
    clients = Table(title="Top clients by bytes", title_justify="left")
    clients.add_column("client id")
    clients.add_column("bytes", justify="right")
    for client, n in snap["clients"][:TOP]:
        clients.add_row(escape(str(client)), _size(n))
    topics = Table(title="Top topics by bytes", title_justify="left")
    topics.add_column("topic")
    topics.add_column("bytes", justify="right")
    for topic, n in snap["topics"][:TOP]:
        topics.add_row(escape(str(topic)), _size(n))
    dropped = snap["kernel_dropped"]
    drops = "unknown until the capture stops" if dropped is None else str(dropped)
    style = "bold red" if (dropped or snap["tcp_gaps"]) else ""
    status = Text.assemble(
        (escape(title) + "  " if title else "", "bold"),
        f"up {snap['uptime']:.0f} s  packets {snap['packets']}  in flight {snap['in_flight']}  ",
        (f"kernel drops {drops}  TCP gaps {snap['tcp_gaps']}", style),
        f"  orphan responses {snap['orphans']}",
    )
    return Group(status, apis, errors, clients, topics)


class Dashboard:
    def __init__(self, stats: LiveStats, console, title: str = ""):
        self.stats = stats
        self.title = title
        self._live = Live(render(stats, title), console=console, auto_refresh=False, transient=False)
        self._last = 0.0

    def __enter__(self):
        self._live.start()
        return self

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last >= REFRESH:
            self._last = now
            self._live.update(render(self.stats, self.title), refresh=True)

    def __exit__(self, *exc) -> None:
        self.refresh(force=True)
        self._live.stop()
