"""The records table's schema columns and the clients table on a real local[2] Spark, through the
data source and through kinspect spark --records --clients --schemas's job: rows equal kinspect decode
--json's keys and values (the lab's capture of confluent-kafka's real serializers) and kinspect
clients --json --all."""

from __future__ import annotations

import pyarrow.dataset as ds
import pytest

from kinspect.cli.spark import schema_options
from kinspect.spark import job, register
from kinspect.spark.plan import list_inputs, plan
from tests.conftest import PCAPS
from tests.unit.schemas.fixtures import CAPTURE, LOGS
from tests.unit.spark.test_values import _decoded_records, _expected, _got, _kinspect

CLIENT_CAPTURES = [PCAPS / "java-transactions.pcap", CAPTURE]


@pytest.fixture(scope="module")
def spark(spark_session):
    register(spark_session)
    return spark_session


def _keyed(rows: list[dict]) -> dict[tuple, dict]:
    return {(r["conn"], r["correlation_id"], r["side"], r["topic"], r["partition"], r["offset"]): r for r in rows}


def _order(row: dict) -> tuple:
    return row["capture"], str(row["client_id"]), str(row["software_name"]), str(row["software_version"])


def _clients_expected() -> list[dict]:
    return sorted(({"capture": str(c), **{k: v for k, v in line.items() if k != "type"}}
                   for c in CLIENT_CAPTURES for line in _kinspect("clients", "--json", "--all", c)
                   if line.get("type") == "client"), key=_order)


def _clients(rows: list[dict]) -> list[dict]:
    """Rows as kinspect clients --json writes them (a map read back as a dict or as pairs)."""
    return sorted(({**r, "errors": dict(r["errors"] or {})} for r in rows), key=_order)


def test_records_and_clients_equal_decode_and_clients_json(spark, tmp_path):
    expected = {k: _expected(r) for k, r in _decoded_records(CAPTURE).items()}
    read = [r.asDict(recursive=True) for r in spark.read.format("kinspect").option("table", "records")
            .option("schemas", str(LOGS)).load(str(CAPTURE)).collect()]
    got = {k: _got(r) for k, r in _keyed(read).items()}
    assert got == expected
    raw = spark.read.format("kinspect").option("table", "records").option("raw_values", "true").load(str(CAPTURE))
    assert raw.filter("value_json is not null or value_schema_id is not null").count() == 0
    clients = [r.asDict(recursive=True) for r in spark.read.format("kinspect").option("table", "clients")
               .load([str(c) for c in CLIENT_CAPTURES]).collect()]
    assert _clients(clients) == _clients_expected()

    out = tmp_path / "tables"  # kinspect spark --records --clients --schemas LOGS: its job, in this session
    options = {"ports": {9092}, "heuristic": True, "show_secrets": False,
               **schema_options(True, False, [str(LOGS)], "_schemas")}
    inputs = list_inputs([str(c) for c in CLIENT_CAPTURES])
    job.write(spark, plan(inputs, cores=2), str(out), options=options, records=True)
    job.write_clients(spark, inputs, str(out), options=options)
    written = [r for r in ds.dataset(out / "records").to_table().to_pylist() if r["capture"] == str(CAPTURE)]
    assert {k: _got(r) for k, r in _keyed(written).items()} == expected
    assert _clients(ds.dataset(out / "clients").to_table().to_pylist()) == _clients_expected()


def test_kinspect_spark_options():
    assert schema_options(True, False, ["a", "b"], "t") == {"schemas": ["a", "b"], "schemas_topic": "t"}
    assert schema_options(True, True, ["a"], "t") == schema_options(False, False, ["a"], "t") == {}
