"""decode/finish.py: the one finishing step, and the stages a caller adds after the bodies
(issue 33's schema-aware values plug in there), in this process and on worker processes."""

import json

from kinspect.decode.filters import ExchangeFilter
from kinspect.decode.finish import JSON, RECORD, Finish, decoded_records
from kinspect.decode.parallel import run_outputs
from kinspect.decode.pipeline import DecodeRun
from kinspect.wire.exchange import RAW
from tests.conftest import PCAPS

CAPTURE = PCAPS / "librdkafka-produce-consume.pcapng"


def _mark(exchange, topics, budget):
    """A stage: it runs after the bodies are decoded, on every exchange, under the run's budget."""
    assert RAW not in exchange and "request" in exchange and budget is not None
    exchange["stage"] = exchange["api_name"]


def _plain():
    return [json.loads(line) for line, _ in run_outputs(DecodeRun(str(CAPTURE)), ExchangeFilter(), JSON, 1)
            if line is not None]


def test_a_stage_sees_every_exchange_after_its_bodies_here_and_on_workers(monkeypatch):
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 3)  # several chunks
    plain = _plain()
    exchanges = sum(r["type"] == "exchange" for r in plain)
    assert exchanges > 10
    for jobs in (1, 2):
        staged = [json.loads(line) for line, _ in
                  run_outputs(DecodeRun(str(CAPTURE)), ExchangeFilter(), JSON, jobs, stages=(_mark,))
                  if line is not None]
        assert [r.get("stage") for r in staged] == [r["api_name"] if r["type"] == "exchange" else None
                                                     for r in plain]
        assert [{k: v for k, v in r.items() if k != "stage"} for r in staged] == plain


def test_the_filters_see_what_the_stages_made():
    run = DecodeRun(str(CAPTURE))
    keep = lambda record: record.get("stage") == "Produce"  # noqa: E731
    finish = Finish(run.topics, run.limits, keep=keep, mode=RECORD, stages=(_mark,))
    kept = [out for out, _ in map(finish.record, run.raw_records()) if out is not None]
    assert kept and all(r["api_name"] == "Produce" for r in kept)


def test_decoded_records_runs_the_stages_and_leaves_its_budget_to_the_run():
    run = DecodeRun(str(CAPTURE))
    records = list(decoded_records(run, stages=(_mark,)))
    assert all(r.get("stage") == r["api_name"] for r in records if r["type"] == "exchange")
    assert run.budget is not None and run.budget.inflate_low <= run.limits.max_batch_bytes
    assert [{k: v for k, v in r.items() if k != "stage"} for r in records] == list(DecodeRun(str(CAPTURE)).records())
