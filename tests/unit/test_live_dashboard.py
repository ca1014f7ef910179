"""The --live dashboard (kinspect/live/dashboard.py) drawn from LiveStats fed the way sniff feeds
them: a committed capture of real Java clients (transactions: errors of three codes, several
client ids, topics) decoded by pipeline.DecodeRun and finished by parallel.finish, each record
then added to LiveStats, with the stats' clock following the capture's time. The panels are
checked against figures computed here from the same exchanges: requests/s and latency p50/p99
per API, errors by code, top clients and topics by bytes, requests in flight and drops."""

from __future__ import annotations

import io
import math
import re
from collections import Counter

from rich.console import Console

from kinspect.decode.filters import ExchangeFilter, topics_of
from kinspect.limits import Budget, Limits
from kinspect.live.dashboard import TOP, Dashboard, _size
from kinspect.live.stats import WINDOW, LiveStats
from kinspect.decode.finish import RECORD, finish_record
from kinspect.decode.pipeline import DecodeRun
from tests.conftest import PCAPS

CAPTURE = PCAPS / "java-transactions.pcap"


def _nearest_rank(values, q):
    values = sorted(values)
    return values[max(1, math.ceil(q / 100 * len(values))) - 1] if values else None


def _ms(value):
    return "-" if value is None else f"{value:.3f}"


def _feed():
    """Decode the capture as sniff does; return the stats, the exchanges (with the capture time at
    which each was added) and the in-flight count read mid-capture, when requests were pending."""
    now = [0.0]
    stats = LiveStats(clock=lambda: now[0])
    run = DecodeRun(str(CAPTURE))
    budget = Budget(Limits(), pack_records=False)
    keep = ExchangeFilter([], [], [], False, None)
    exchanges = []
    in_flight = None
    first = True
    for record in run.raw_records():
        budget.next_unit()
        finish_record(record, run.topics, keep, RECORD, budget)
        stamp = record.get("response_time") or record.get("request_time") or record.get("time") or now[0]
        if first:  # the dashboard's clock starts with the capture
            stats.started = now[0] = stamp
            first = False
        now[0] = max(now[0], stamp)
        stats.add(record)
        if record.get("type") == "exchange":
            exchanges.append((now[0], record))
        pending = run.session.in_flight()
        if in_flight is None and pending:
            in_flight = pending
            stats.set_capture(in_flight=pending)
    stats.set_capture(packets=run.packets, received=run.packets + 7, dropped=7)
    return stats, exchanges, in_flight, now[0], run.packets


def _cells(text: str, first: str) -> list[list[str]]:
    """The rows of the drawn tables whose first cell is ``first``."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)]
        cells = [c for c in cells if c]
        if cells and cells[0] == first:
            rows.append(cells)
    return rows


def _draw(stats) -> str:
    console = Console(record=True, width=200, file=io.StringIO(), force_terminal=False, color_system=None)
    with Dashboard(stats, console, title="lo (ring)") as board:
        board.refresh(force=True)
    return console.export_text()


def test_the_dashboard_shows_what_the_exchanges_say():
    stats, exchanges, in_flight, now, packets = _feed()
    text = _draw(stats)
    assert len(exchanges) > 30 and in_flight

    # requests/s and latency p50/p99 per API over the last WINDOW seconds
    span = min(WINDOW, now - stats.started)
    recent = [e for t, e in exchanges if t >= now - WINDOW]
    by_api = Counter(e["api_name"] for _, e in exchanges)
    assert "Requests by API (last 10 s)" in text
    for api, total in by_api.items():
        mine = [e for e in recent if e["api_name"] == api]
        latencies = [e["latency_ms"] for e in mine if e["latency_ms"] is not None]
        unanswered = sum(1 for _, e in exchanges if e["api_name"] == api and e["response"] is None)
        expected = [api, f"{len(mine) / span:.1f}", _ms(_nearest_rank(latencies, 50)),
                    _ms(_nearest_rank(latencies, 99)), str(total), str(unanswered)]
        assert [row for row in _cells(text, api) if len(row) == 6] == [expected], (api, text)

    # errors by code: NOT_COORDINATOR, CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE
    errors = Counter((e["api_name"], str(code)) for _, e in exchanges for code in e["error_codes"])
    assert len(errors) >= 3
    for (api, code), n in errors.items():
        assert [api, code, str(n)] in _cells(text, api), (api, code, text)

    # top clients and topics by bytes (request + response)
    clients, topics = Counter(), Counter()
    for _, e in exchanges:
        size = (e["request_size"] or 0) + (e["response_size"] or 0)
        clients[e["client_id"] or "-"] += size
        for topic in topics_of(e):
            topics[topic] += size
    assert len(clients) >= 2 and topics
    for table, counts in (("Top clients by bytes", clients), ("Top topics by bytes", topics)):
        section = text.split(table, 1)[1]
        drawn = [line for line in section.splitlines() if any(f" {name} " in line for name in counts)]
        shown = [(name, _size(n)) for name, n in counts.most_common(TOP)]
        for name, size in shown:
            assert any(re.search(rf"\b{re.escape(name)}\s.*\s{re.escape(size)}\b", line) for line in drawn), \
                (table, name, size, section)

    # the status line: packets, requests in flight, kernel drops
    status = text.splitlines()[0]
    assert f"packets {packets}" in status
    assert f"in flight {in_flight} " in status
    assert "kernel drops 7 " in status and "TCP gaps 0" in status


def test_drops_not_yet_known_say_so():
    """dumpcap reports its drops only when it stops: until then the dashboard says so."""
    stats = LiveStats()
    stats.set_capture(packets=10, in_flight=0)
    status = _draw(stats).splitlines()[0]
    assert "kernel drops unknown until the capture stops" in status and "packets 10 " in status
