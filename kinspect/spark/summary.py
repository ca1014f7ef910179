"""`kinspect spark --summary`: the summary computed in Spark from the exchanges table.

The figures are decode --summary's (kinspect/summary.py), per API: count, versions, answered,
unanswered (a request that expects a response and got none), latency p50/p99/max (nearest
rank), bytes; errors by API, code and topic; and the top talkers: client ids by bytes, with
their latencies.

Percentiles use percentile_approx, whose rank error is at most count/accuracy: with an accuracy
above the largest group's count it gives the exact nearest-rank value, as decode does. Up to
EXACT_LATENCIES exchanges a group (decode keeps that many exactly too); past that, its rank is
within count/EXACT_LATENCIES of the exact one.
"""

from __future__ import annotations

EXACT_LATENCIES = 1_000_000
TOP_TALKERS = 20


def accuracy(largest_group: int) -> int:
    """percentile_approx's accuracy: above the largest group's count (exact), within bounds."""
    return max(10_000, min(largest_group + 1, EXACT_LATENCIES))


def _latency(F, acc: int) -> list:
    p = F.percentile_approx("latency_ms", [0.5, 0.99], acc)
    return [F.count("latency_ms").alias("answered"), p[0].alias("latency_p50_ms"), p[1].alias("latency_p99_ms"),
            F.max("latency_ms").alias("latency_max_ms")]


def _bytes(F):
    return F.sum(F.coalesce("request_bytes", F.lit(0)) + F.coalesce("response_bytes", F.lit(0))).alias("bytes")


def summarize(exchanges) -> dict:
    """DataFrames ``apis``, ``errors`` and ``talkers`` from an exchanges DataFrame."""
    from pyspark.sql import functions as F
    largest = exchanges.groupBy("api_name").count().agg(F.max("count")).first()[0] or 0
    clients = exchanges.withColumn("client_id", F.coalesce("client_id", F.lit("")))
    largest = max(largest, clients.groupBy("client_id").count().agg(F.max("count")).first()[0] or 0)
    acc = accuracy(largest)
    apis = (exchanges.groupBy("api_name")
            .agg(F.array_sort(F.collect_set("api_version")).alias("versions"), F.count("*").alias("count"),
                 *_latency(F, acc),
                 F.sum(F.when(F.col("latency_ms").isNull() & F.col("response_expected"), 1).otherwise(0))
                 .alias("unanswered"), _bytes(F))
            .select("api_name", "versions", "count", "answered", "unanswered", "latency_p50_ms",
                    "latency_p99_ms", "latency_max_ms", "bytes")
            .orderBy(F.col("count").desc(), "api_name"))
    errors = (exchanges.where(F.size("error_codes") > 0)
              .select("api_name", F.explode("error_codes").alias("error"),
                      F.when(F.size("topics") > 0, F.col("topics")).otherwise(F.array(F.lit("-"))).alias("topics"))
              .select("api_name", "error", F.explode("topics").alias("topic"))
              .groupBy("api_name", "error", "topic").count()
              .orderBy(F.col("count").desc(), "api_name", "error", "topic"))
    talkers = (clients.groupBy("client_id")
               .agg(_bytes(F), F.count("*").alias("count"), *_latency(F, acc))
               .orderBy(F.col("bytes").desc(), "client_id").limit(TOP_TALKERS))
    return {"apis": apis, "errors": errors, "talkers": talkers}


def write(tables: dict, out: str, fmt: str = "parquet") -> dict[str, list[dict]]:
    """Each table written under ``out``/summary/NAME, and its rows collected (they are few)."""
    import os
    rows = {}
    for name, df in tables.items():
        df = df.coalesce(1).cache()  # computed once for both
        try:
            df.write.mode("error").format("parquet" if fmt == "parquet" else "json") \
                .option("ignoreNullFields", "false").save(os.path.join(out, "summary", name))
            rows[name] = [r.asDict() for r in df.collect()]
        finally:
            df.unpersist()
    return rows


def render(rows: dict[str, list[dict]]) -> str:
    """The summary as plain-text tables."""
    out = []
    titles = {"apis": "Exchanges by API", "errors": "Errors by code and topic", "talkers": "Top talkers by bytes"}
    for name, title in titles.items():
        table = rows.get(name) or []
        out.append(title)
        if not table:
            out.append("(none)")
            out.append("")
            continue
        columns = list(table[0])
        cells = [[_cell(row[c]) for c in columns] for row in table]
        widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
        out.append("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
        for r in cells:
            out.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                                 for i, (v, w) in enumerate(zip(r, widths))).rstrip())
        out.append("")
    return "\n".join(out)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)
