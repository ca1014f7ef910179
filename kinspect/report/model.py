"""What the page shows, as plain data: sections of charts and tables, from a Gathered.

A chart: {"id", "title", "mark": "line"|"bar"|"rounds", "x": {"title", "type"}, "y": {...},
"series": [{"name", "points": [[x, y, ...], ...]}], "note"}. Times are milliseconds since the
epoch (UTC); "type" is "time", "log" (a logarithmic axis of quantities), "linear" or "band".
A table: {"id", "title", "columns", "rows": [[cell text, ...], ...]}. Every name from the input
is text already escaped for a terminal (escape.shown); page.py escapes it again for HTML."""

from __future__ import annotations

from kinspect.doctor.finding import iso
from kinspect.report.escape import shown
from kinspect.report.gather import Gathered
from kinspect.report.histogram import bins
from kinspect.report.timeline import MAX_SERIES, OTHERS

ROWS = 1000      # rows a table shows (the rest are counted)
FINDINGS = 200   # findings shown, most severe first (the rest are counted)
CELL = 1200      # characters of a client table's cell (its APIs and topics lists)
CHART_OF = {"rebalance": "rebalance", "lag": "lag", "slow": "latency-p99", "errors": "errors",
            "producer_sequence": "errors", "throttle": "clients", "removed_api_versions": "clients",
            "hanging_transaction": "findings", "schemas": "schemas"}
TIME = {"title": "time (UTC)", "type": "time"}


def _time(gathered: Gathered) -> dict:
    """The time axis of the capture's charts: all of them span the capture (ms since the epoch).
    Within one UTC day the ticks are times and the title names the day; past it, dates and times."""
    times = gathered.timeline.times()
    if not times:
        return TIME
    start, end = times[0], times[-1] + gathered.timeline.width
    first, last = iso(start), iso(end - 0.001)
    same_day = first is not None and last is not None and first[:10] == last[:10]
    return {**TIME, "domain": [round(start * 1000, 3), round(end * 1000, 3)],
            "title": f"time (UTC, {first[:10]})" if same_day else "time (UTC)",
            "format": "%H:%M:%S" if same_day else "%Y-%m-%d %H:%M"}


def build(gathered: Gathered, inputs: list[str], log_dir: str | None) -> dict:
    sections = []
    timeline = gathered.timeline
    if timeline.buckets:
        sections += [_traffic(gathered), _latency(gathered), _groups(gathered), _errors(gathered),
                     _clients(gathered)]
        if gathered.summary.schema_rows():
            sections.append(_schemas(gathered))
    if gathered.storage is not None:
        sections.append(_storage(gathered))
    return {"inputs": [shown(i) for i in inputs], "log_dir": shown(log_dir) if log_dir else None,
            "exchanges": gathered.doctor.exchanges,
            "bucket_s": timeline.width if timeline.buckets else None,
            "span": [iso(timeline.origin), iso(timeline.times()[-1] + timeline.width)] if timeline.buckets else None,
            "findings": [_finding(i, f) for i, f in enumerate(gathered.findings[:FINDINGS])],
            "findings_total": len(gathered.findings),
            "notices": [shown(n.get("what", n)) for n in gathered.notices] + [shown(p) for p in gathered.log_dir_problems],
            "sections": sections}


def _finding(index: int, found: dict) -> dict:
    hidden = {"type", "check", "severity", "summary", "evidence", "series", "rounds"}
    facts = [[shown(k), shown(_fact(v))] for k, v in found.items() if k not in hidden and v not in (None, [], {}, "")]
    return {"id": f"finding-{index}", "check": found["check"], "severity": found["severity"],
            "summary": shown(found["summary"]), "chart": CHART_OF.get(found["check"], "findings"),
            "facts": facts,
            "evidence": [{"time": iso(e.get("time")), "command": shown(_decode_command(e))}
                         for e in found.get("evidence") or ()]}


def _fact(value) -> str:
    if isinstance(value, list):
        return "; ".join(_fact(v) for v in value[:10]) + (f" (+{len(value) - 10} more)" if len(value) > 10 else "")
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fact(v)}" for k, v in value.items() if v is not None)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _decode_command(seen: dict) -> str:
    port = str(seen.get("conn") or "").rpartition(":")[2]
    port = f" --port {port}" if port.isdigit() and port != "9092" else ""
    capture = f" {seen['capture']}" if seen.get("capture") else ""
    return f"kinspect decode{port} --conn {seen.get('conn')} --correlation-id {seen.get('correlation_id')}{capture}"


def _time_series(times: list[float], by_name: dict[str, list]) -> list[dict]:
    out = []
    for name in sorted(by_name, key=lambda n: (n == OTHERS, n)):
        points = [[round(t * 1000, 3), v] for t, v in zip(times, by_name[name]) if v is not None]
        out.append({"name": shown(name), "points": points})
    return out


def _rate_chart(gathered: Gathered, chart_id: str, title: str, field: str, kind: str, unit: str) -> dict:
    timeline = gathered.timeline
    return {"id": chart_id, "title": title, "mark": "line", "x": _time(gathered), "y": {"title": unit, "type": "linear"},
            "series": _time_series(timeline.times(), timeline.rates(field, kind)),
            "note": f"mean per second over each {timeline.width:g} s bucket"}


def _traffic(gathered: Gathered) -> dict:
    return {"id": "traffic", "title": "Traffic", "tables": [], "charts": [
        _rate_chart(gathered, "requests-by-api", "Requests by API", "requests", "api", "requests/s"),
        _rate_chart(gathered, "bytes-by-api", "Bytes by API (requests and responses)", "bytes", "api", "bytes/s"),
        _rate_chart(gathered, "requests-by-broker", "Requests by broker", "broker_requests", "broker", "requests/s"),
        _rate_chart(gathered, "bytes-by-broker", "Bytes by broker", "broker_bytes", "broker", "bytes/s")]}


def _latency(gathered: Gathered) -> dict:
    timeline = gathered.timeline
    charts = [{"id": f"latency-p{q}", "title": f"Latency p{q} per API", "mark": "line", "x": _time(gathered),
               "y": {"title": f"p{q} latency (ms)", "type": "linear"},
               "series": _time_series(timeline.times(), timeline.latency(q)),
               "note": f"nearest-rank p{q} of the exchanges answered in each {timeline.width:g} s bucket"}
              for q in (50, 99)]
    summary = gathered.summary
    histogram = []
    for row in summary.rows()[:MAX_SERIES]:
        shown_bins = bins(summary.latencies[row["api_name"]])
        if shown_bins:
            histogram.append({"name": shown(row["api_name"]),
                              "points": [[b["from_ms"], b["count"], b["to_ms"]] for b in shown_bins]})
    charts.append({"id": "latency-histogram", "title": "Latency histogram per API", "mark": "histograms",
                   "x": {"title": "latency (ms, five bins a decade)", "type": "log"},
                   "y": {"title": "exchanges", "type": "linear"}, "series": histogram,
                   "note": "one chart per API (in name order), every answered exchange of the capture; the "
                           "latency axis is shared, each chart's count axis is its own"})
    columns = ["api_name", "versions", "count", "answered", "unanswered", "latency_p50_ms", "latency_p99_ms",
               "latency_max_ms", "bytes"]
    rows = [[shown(_cell(r.get(c))) for c in columns] for r in summary.rows()]
    return {"id": "latency", "title": "Latency", "charts": charts,
            "tables": [{"id": "summary", "title": "Exchanges by API (decode --summary)", "columns": columns,
                        "rows": rows}]}


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def _groups(gathered: Gathered) -> dict:
    rounds = []
    rebalanced = [f for f in gathered.findings if f["check"] == "rebalance" and f.get("rounds")]
    for found in sorted(rebalanced, key=lambda f: -f["rebalances"])[:MAX_SERIES]:
        rounds.append({"name": shown(found["group"]), "points": [
            [round(r["started"] * 1000, 3), r["members"], round((r["assigned"] or r["started"]) * 1000, 3),
             r["generation"], r.get("joined"), r.get("left"), r["pause_ms"], _round_label(r)]
            for r in found["rounds"]]})
    most = sorted(gathered.lag_rows, key=lambda r: -r["lag"])[:MAX_SERIES]
    lag = [{"name": shown(f"{row['group']} {row['topic']}-{row['partition']}"),
            "points": [[round(p["time"] * 1000, 3), p["lag"]] for p in row["series"]]}
           for row in gathered.lag_rows if any(row is m for m in most)]
    lag_table = [[shown(row[c]) if row[c] is not None else "-" for c in
                  ("group", "topic", "partition", "committed_offset", "log_end_offset", "lag", "lag_seconds", "isolation")]
                 for row in gathered.lag_rows[:ROWS]]
    return {"id": "groups", "title": "Consumer groups", "charts": [
        {"id": "rebalance", "title": "Rebalances per group", "mark": "rounds", "x": _time(gathered),
         "y": {"title": "members after the round", "type": "linear"}, "series": rounds,
         "note": "one point per generation formed after the first, at the round's start, labelled with "
                 "its generation and the members that joined (+) and left (-); the bar runs to the last "
                 "assignment (the time without one)"
                 + (f"; the {MAX_SERIES} groups that rebalanced most of {len(rebalanced)}"
                    if len(rebalanced) > MAX_SERIES else "")},
        {"id": "lag", "title": "Lag per group and partition", "mark": "line", "x": _time(gathered),
         "y": {"title": "lag (records)", "type": "linear"}, "series": lag,
         "note": "log end minus committed offset, as kafka-consumer-groups computes LAG"
                 + (f"; the {MAX_SERIES} group partitions most behind of {len(gathered.lag_rows)}"
                    if len(gathered.lag_rows) > MAX_SERIES else "")}],
        "tables": [{"id": "lag-table", "title": "Lag at the end of the capture",
                    "columns": ["group", "topic", "partition", "committed", "log end", "lag", "lag seconds",
                                "isolation"], "rows": lag_table}]}


def _round_label(done: dict) -> str:
    joined, left = done.get("joined"), done.get("left")
    moves = f" +{joined} -{left}" if joined is not None and left is not None else ""
    return f"gen {done['generation']}{moves}"


def _errors(gathered: Gathered) -> dict:
    timeline = gathered.timeline
    rows = [[shown(r["api_name"]), shown(r["error"]), shown(r["topic"]), str(r["count"])]
            for r in gathered.summary.error_rows()[:ROWS]]
    return {"id": "errors-section", "title": "Errors", "charts": [
        {"id": "errors", "title": "Error codes over time", "mark": "line", "x": _time(gathered),
         "y": {"title": "errors/s", "type": "linear"},
         "series": _time_series(timeline.times(), timeline.rates("errors", "error")),
         "note": f"error codes in responses, mean per second over each {timeline.width:g} s bucket"}],
        "tables": [{"id": "error-table", "title": "Errors by API, code and topic (decode --summary)",
                    "columns": ["api", "error", "topic", "count"], "rows": rows}]}


def _clients(gathered: Gathered) -> dict:
    rows = []
    for r in gathered.inventory.rows()[:ROWS]:
        honoured = r["throttling_honoured"]
        rows.append([shown(_cell(v), CELL) for v in (
            r["client_id"], " ".join(str(v) for v in (r["software_name"], r["software_version"]) if v) or None,
            r["addresses"], r["connections"],
            " ".join(f"{a['api_name']}:{','.join(map(str, a['versions']))}" for a in r["apis"]),
            "ready" if r["kip896_ready"] else "NOT READY: " + ", ".join(r["removed_versions"]),
            None if honoured is None else f"{'honoured' if honoured else 'NOT honoured'} ({r['throttle_ms']} ms)",
            r["produced_topics"], r["fetched_topics"],
            " ".join(f"{k}:{n}" for k, n in r["errors"].items()) or None,
            "yes" if r["internal"] else "no")])
    return {"id": "clients", "title": "Clients", "charts": [], "tables": [
        {"id": "client-table", "title": "Client inventory (kinspect clients), with KIP-896 readiness",
         "columns": ["client id", "software", "addresses", "connections", "APIs:versions", "KIP-896",
                     "throttling", "produced", "fetched", "errors", "broker's own"], "rows": rows}]}


SCHEMA_COLUMNS = ["api", "side", "subject", "id", "format", "records", "decoded", "unknown id", "failed"]
SCHEMA_ROWS = 300  # rows of the schema table, those of most records (subjects are long: the page's bound)
SUBJECT = 120      # characters of a subject shown


def _schemas(gathered: Gathered) -> dict:
    every = gathered.summary.schema_rows()
    chosen = every if len(every) <= SCHEMA_ROWS else sorted(every, key=lambda r: -r["records"])[:SCHEMA_ROWS]
    rows = [[shown(_cell(r["api_name"])), r["side"], shown(_cell(r["subject"]), SUBJECT),
             shown(_cell(r["id"] if r["id"] is not None else r.get("guid"))), shown(_cell(r["format"]))]
            + [str(r[k]) for k in ("records", "decoded", "unknown", "failed")] for r in chosen]
    cut = f"; the {len(chosen)} of most records of {len(every)}" if len(chosen) < len(every) else ""
    return {"id": "schemas", "title": "Values by schema", "charts": [], "tables": [
        {"id": "schema-table", "title": f"Keys and values by schema (decode --summary{cut})",
         "columns": SCHEMA_COLUMNS, "rows": rows}]}


def _storage(gathered: Gathered) -> dict:
    found = gathered.storage
    largest = sorted(found.partitions, key=lambda p: -p.log_bytes)
    sizes = {"id": "partition-sizes", "title": "Partition sizes", "mark": "bar",
             "x": {"title": "partition", "type": "band"}, "y": {"title": "log bytes", "type": "linear"},
             "series": [{"name": "log bytes", "points": [[shown(p.name), p.log_bytes] for p in largest[:100]]}],
             "note": "bytes of the partition's .log segments" + (
                 f"; the 100 largest of {len(largest)}" if len(largest) > 100 else "")}
    batch_sizes = {"id": "batch-sizes", "title": "Batch sizes per codec", "mark": "histogram",
                   "x": {"title": "batch size (bytes, up to a power of two)", "type": "log"},
                   "y": {"title": "batches", "type": "linear"},
                   "series": [{"name": shown(codec), "points": [[size // 2 + 1 if size > 1 else 0, n, size]
                                                                 for size, n in sorted(counts.items())]}
                              for codec, counts in sorted(found.sizes.items())],
                   "note": "each bar counts the batches from its lower to its upper size"}
    codecs = {"id": "codecs", "title": "Codecs", "mark": "bar", "x": {"title": "codec", "type": "band"},
              "y": {"title": "batches", "type": "linear"},
              "series": [{"name": "batches", "points": [[shown(c), n] for c, n in sorted(found.codecs.items())]}],
              "note": "bytes per codec: " + ", ".join(f"{c} {n}" for c, n in sorted(found.codec_bytes.items()))}
    timestamps = {"id": "timestamps", "title": "Timestamps over offsets", "mark": "line",
                  "x": {"title": "offset (last offset of the batch)", "type": "linear"},
                  "y": {"title": "max timestamp (UTC)", "type": "time"},
                  "series": [{"name": shown(p.name), "points": [[o, s] for o, s in p.points]}
                             for p in largest[:MAX_SERIES] if p.points],
                  "note": f"one point per batch (at most {MAX_SERIES} partitions, the largest; long partitions sampled)"}
    columns = ["file", "check", "severity", "what", "path", "position", "base_offset"]
    rows = [[shown(_cell(f.get(c))) for c in columns] for f in found.findings]
    counts = ", ".join(f"{n} {s}" for s, n in sorted(found.finding_counts.items())) or "none"
    return {"id": "storage", "title": "Log dir", "charts": [sizes, batch_sizes, codecs, timestamps], "tables": [
        {"id": "validate-table", "title": f"validate's findings ({counts})", "columns": columns, "rows": rows},
        {"id": "partition-table", "title": "Partitions", "columns": ["partition", "log bytes", "batches", "records"],
         "rows": [[shown(p.name), str(p.log_bytes), str(p.batches), str(p.records)] for p in largest[:ROWS]]}]
        + ([{"id": "unreadable-table", "title": "Unreadable", "columns": ["what"],
             "rows": [[shown(u)] for u in found.unreadable[:ROWS]]}] if found.unreadable else [])}
