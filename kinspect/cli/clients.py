"""kinspect clients: the client inventory of captures."""

from __future__ import annotations

import sys

import click

from kinspect.cli.doctor import read_captures
from kinspect.cli.keylog import keylog_warnings
from kinspect.cli.limits import limit_options
from kinspect.cli.options import capture_options, capture_settings
from kinspect.cli.output import Output, output_options
from kinspect.cli.overlap import refuse_writing_over_inputs
from kinspect.doctor.bounded import DEFAULT_LIMIT
from kinspect.doctor.clients import Inventory
from kinspect.doctor.options import Thresholds
from kinspect.limits import Limits

EPILOG = """\b
Examples:
  kinspect clients capture.pcapng
  kinspect clients --json capture.pcapng | jq 'select(.kip896_ready == false) | .client_id'
  kinspect clients --all monday.pcapng tuesday.pcapng      the brokers' own clients too

\b
Columns: client id, software and version (from ApiVersions v3+), client addresses, connections,
APIs and versions used, KIP-896 readiness (no API version Kafka 4.0 removed), whether it honoured
throttling (- when never throttled), topics produced to and fetched from, error codes.

\b
Exit codes: 0 fine; 1 a capture damaged or without Kafka traffic; 2 usage error; 3 input
unreadable; 4 kinspect could not finish; 130 interrupted.
"""

TABLE = ["client_id", "software", "addresses", "connections", "apis", "kip896", "throttling",
         "produced", "fetched", "errors"]


@click.command(epilog=EPILOG)
@click.argument("captures", nargs=-1, required=True, metavar="CAPTURE...")
@click.option("--all", "show_all", is_flag=True,
              help="Also the brokers' own clients (transaction marker sender, replica fetchers, ...).")
@click.option("--max-state", type=click.IntRange(1), default=DEFAULT_LIMIT, show_default=True,
              help="Clients and connections kept; past it the least recently seen are dropped, with a notice.")
@capture_options
@limit_options
@output_options
def clients(captures, show_all, max_state, ports, no_heuristic, max_frame, max_connections, show_secrets,
            keylog, out: Output, limits: Limits):
    """Every client in the captures: what it runs, what it used, and whether Kafka 4 will take it.

    One row per client id and software: its addresses and connections, the APIs and versions it
    used, its KIP-896 readiness, whether it honoured throttling, the topics it produced to and
    fetched from, and its errors. A table on a terminal, --json rows.
    """
    refuse_writing_over_inputs([*captures, *(keylog.paths if keylog is not None else ())])
    for line in keylog_warnings(keylog):
        out.warn(line)
    inventory = Inventory(Thresholds(max_state=max_state))
    settings = capture_settings(ports, no_heuristic, max_frame, max_connections, show_secrets, keylog, limits)
    exit_code = read_captures(captures, out, settings, inventory.exchange)
    rows = [r for r in inventory.rows() if show_all or not r["internal"]]
    out.rows("Clients", rows, TABLE, cells=_cells)
    for notice in inventory.notices():
        out.notice(notice)
    sys.exit(exit_code)


def _cells(row: dict) -> dict:
    software = " ".join(str(v) for v in (row["software_name"], row["software_version"]) if v) or None
    honoured = row["throttling_honoured"]
    return {
        "client_id": row["client_id"], "software": software, "addresses": row["addresses"],
        "connections": row["connections"],
        "apis": " ".join(f"{a['api_name']}:{','.join(map(str, a['versions']))}" for a in row["apis"]),
        "kip896": "ready" if row["kip896_ready"] else "NOT READY: " + ", ".join(row["removed_versions"]),
        "throttling": None if honoured is None else
        f"{'honoured' if honoured else 'NOT honoured'} ({row['throttle_ms']} ms)",
        "produced": row["produced_topics"], "fetched": row["fetched_topics"],
        "errors": " ".join(f"{k}:{n}" for k, n in row["errors"].items()) or None,
    }
