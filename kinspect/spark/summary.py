"""`kinspect spark --summary`: the summary computed in Spark from the exchanges table.

The figures are decode --summary's (kinspect/summary.py), per API: count, versions, answered,
unanswered (a request that expects a response and got none), latency p50/p99/max (nearest
rank), bytes; errors by API, code and topic; and the top talkers: client ids by bytes, with
their latencies. Beyond decode's: latencies per client and API (``clients``), and traffic per
topic (``topics``).

Topic ids are resolved across files: a capture that holds a Fetch v13+ by topic id but not the
Metadata response naming it (another broker's, or the previous hour's capture has it) gets the
name from the (topic_id, name) pairs of every capture. Errors and topics count resolved names;
an id no capture names stays out of ``errors`` (as in decode) and is a ``topics`` row of its own
with a null name.

Percentiles use percentile_approx, whose rank error is at most count/accuracy: with an accuracy
above the largest group's count it gives the exact nearest-rank value, as decode does. Up to
EXACT_LATENCIES exchanges a group (decode keeps that many exactly too); past that, its rank is
within count/EXACT_LATENCIES of the exact one.
"""

from __future__ import annotations

from kinspect.render.safe import escape
from kinspect.spark.connect import is_connect
from kinspect.spark.job import on_disk

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
    return F.sum(_exchange_bytes(F)).alias("bytes")


def _exchange_bytes(F):
    return F.coalesce("request_size", F.lit(0)) + F.coalesce("response_size", F.lit(0))


def topic_names(exchanges):
    """(topic_id, name) of every id some capture named (the greatest name, should two differ)."""
    from pyspark.sql import functions as F
    return (exchanges.select(F.explode("named_ids").alias("n"))
            .groupBy(F.col("n.topic_id").alias("topic_id")).agg(F.max("n.name").alias("name")))


def resolved(exchanges, names):
    """The exchanges, their ``topics`` joined by the names of their ``topic_ids`` that ``names``
    knows (those it does not know stay in ``topic_ids``)."""
    from pyspark.sql import functions as F
    # row ids kept on disk, so both sides of the join see the same ones
    keyed = on_disk(exchanges.sparkSession, exchanges.withColumn("_row", F.monotonically_increasing_id()))
    found = (keyed.select("_row", F.explode("topic_ids").alias("topic_id"))
             .join(F.broadcast(names), "topic_id", "left")
             .groupBy("_row").agg(F.collect_set("name").alias("_named"),
                                  F.collect_set(F.when(F.col("name").isNull(), F.col("topic_id"))).alias("_unnamed")))
    return (keyed.join(found, "_row", "left")
            .withColumn("topics", F.array_sort(F.array_distinct(F.concat("topics", F.coalesce("_named", F.array())))))
            .withColumn("topic_ids", F.coalesce("_unnamed", F.array().cast("array<string>")))
            .drop("_row", "_named", "_unnamed"))


def summarize(exchanges) -> dict:
    """DataFrames ``apis``, ``errors``, ``talkers``, ``clients`` and ``topics`` from an exchanges
    DataFrame."""
    from pyspark.sql import functions as F
    exchanges = on_disk(exchanges.sparkSession, resolved(exchanges, topic_names(exchanges)))
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
    per_client = (clients.groupBy("client_id", "api_name")
                  .agg(F.count("*").alias("count"), *_latency(F, acc))
                  .orderBy("client_id", F.col("count").desc(), "api_name"))
    named = (exchanges.select(F.explode("topics").alias("topic"), _exchange_bytes(F).alias("b"))
             .select("topic", F.lit(None).cast("string").alias("topic_id"), "b"))
    unnamed = exchanges.select(F.lit(None).cast("string").alias("topic"), F.explode("topic_ids").alias("topic_id"),
                               _exchange_bytes(F).alias("b"))
    topics = (named.unionByName(unnamed).groupBy("topic", "topic_id")
              .agg(F.count("*").alias("exchanges"), F.sum("b").alias("bytes"))
              .orderBy(F.col("bytes").desc(), "topic", "topic_id"))
    return {"apis": apis, "errors": errors, "talkers": talkers, "clients": per_client, "topics": topics}


def write(tables: dict, out: str, fmt: str = "parquet") -> dict[str, list[dict]]:
    """Each table written under ``out``/summary/NAME, and its rows collected (they are few)."""
    import os
    rows = {}
    for name, df in tables.items():
        df = on_disk(df.sparkSession, df.coalesce(1))  # computed once for both
        try:
            df.write.mode("error").format("parquet" if fmt == "parquet" else "json") \
                .option("ignoreNullFields", "false").save(os.path.join(out, "summary", name))
            rows[name] = [r.asDict() for r in df.collect()]
        finally:
            if not is_connect(df.sparkSession):
                df.unpersist()
    return rows


def render(rows: dict[str, list[dict]]) -> str:
    """The summary as plain-text tables."""
    out = []
    titles = {"apis": "Exchanges by API", "errors": "Errors by code and topic", "talkers": "Top talkers by bytes",
              "clients": "Latency by client and API", "topics": "Traffic by topic"}
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
    """A value as the table shows it: text from the capture (a client id, a topic) with its
    control characters escaped (render.safe.escape), so no escape sequence reaches a terminal."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return escape(",".join(map(str, value)))
    return escape(str(value))
