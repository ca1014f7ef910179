"""The one finishing step: what happens to a record after pairing, whichever adapter read it.

An exchange comes out of the source seam (pipeline.DecodeRun.raw_records) with its bodies raw.
Finishing it runs its stages, in order, then the user's filters, then shapes the output:

- the stages: by default one, ``wire.exchange.complete``: bodies decoded, topic ids named
  (``wire/topics.py``), secrets redacted (``wire/secrets.py``, unless the run shows them). A
  caller may add stages after it (``stages=``), each called as ``stage(exchange, topics, budget)``
  on every exchange finished, in place: schema-aware values (issue 33) plug in here, one stage
  that calls ``schemas.records.apply_record`` on the records of the exchange's batches;
- the filters (``filters.ExchangeFilter``, or any ``keep(record) -> bool``);
- the output by mode: JSON (the line's pieces), SUMMARY (the exchange without its bodies) or
  RECORD (the record itself).

Every adapter goes through here: decode's files and stdin (parallel.run_outputs, in this process
or on workers), sniff and the proxy's tap (live/loop.py), doctor (doctor/source.py), Spark tasks
and the library's ``DecodeRun.records()`` (``decoded_records``). ``Finish`` owns the run's
``limits.Budget``: the only one an exchange is decoded under.
"""

from __future__ import annotations

from typing import Callable, Iterator

from kinspect.decode.filters import topics_of
from kinspect.limits import DEFAULT_LIMITS, Budget, Limits
from kinspect.render.jsonl import pieces
from kinspect.wire.exchange import RAW, complete
from kinspect.wire.topics import TopicNames

JSON, SUMMARY, RECORD = "json", "summary", "record"

# What finishing does to an exchange's raw bodies: each stage(exchange, topics, budget), in order
BODIES = (complete,)

# Responses that may name topic ids (TopicNames.learn): api key -> the first version whose topic
# entries carry both TopicId and Name (checked against Kafka's own specs). A run that gives out
# only some records (``keep_record``) still decodes these among the others, so that its Fetch
# v13+ rows name their topics as one whole run would.
TOPIC_NAMING = {3: 10, 19: 7, 20: 6, 75: 0, 91: 0, 92: 0}


def every(record: dict) -> bool:
    return True


def finish_record(record: dict, topics: TopicNames, keep: Callable[[dict], bool], mode: str,
                  budget: Budget | None = None, stages: tuple = BODIES):
    """One record finished: (output or None when filtered out, whether the record has an error
    problem). A JSON output is the line's pieces: one, or more written as they are encoded when
    the record holds batches too big to hold (see render.jsonl.pieces)."""
    if RAW in record:
        for stage in stages:
            stage(record, topics, budget)
    problems = record.get("problems")
    error = bool(problems) and any(p.get("severity") == "error" for p in problems)
    if not keep(record):
        return None, error
    if mode == JSON:
        return pieces(record, newline=True), error
    if mode == SUMMARY and record.get("type") == "exchange":
        slim = {k: v for k, v in record.items() if k not in ("request", "response")}
        slim["_topics"] = sorted(topics_of(record)) if record["error_codes"] else []
        return slim, error
    return record, error


class Finish:
    """A run's finishing step and the Budget it decodes under.

    ``record(r)`` finishes a record as a unit of its own (it is written out before the next one
    is finished: sniff, the proxy, decode in one process); ``held(r)`` adds it to the unit under
    way, which ``new_unit()`` starts afresh (a worker's chunk, held until its turn to write).
    ``pack_records``: regular batches may keep their records as bytes (records/packed.py).
    ``stages``: more stages after BODIES (see the module's docstring)."""

    __slots__ = ("topics", "limits", "keep", "mode", "pack_records", "extra", "stages", "budget")

    def __init__(self, topics: TopicNames, limits: Limits = DEFAULT_LIMITS, *,
                 keep: Callable[[dict], bool] = every, mode: str = RECORD, pack_records: bool = True,
                 stages: tuple = ()):
        self.topics, self.limits, self.keep, self.mode = topics, limits, keep, mode
        self.pack_records = pack_records
        self.extra = tuple(stages)
        self.stages = BODIES + self.extra
        self.new_unit()

    def twin(self, topics: TopicNames) -> Finish:
        """The same step over other topic names (a worker process's)."""
        return Finish(topics, self.limits, keep=self.keep, mode=self.mode, pack_records=self.pack_records,
                      stages=self.extra)

    def new_unit(self) -> None:
        """What follows is a new unit of work, with the bounds of a new one."""
        self.budget = Budget(self.limits, pack_records=self.pack_records)

    def record(self, record: dict):
        """(output, has_error) of one record, a unit of its own (see finish_record)."""
        self.budget.next_unit()  # the record before this one was written out
        return finish_record(record, self.topics, self.keep, self.mode, self.budget, self.stages)

    def held(self, record: dict):
        """(output, has_error) of one record of the unit under way."""
        return finish_record(record, self.topics, self.keep, self.mode, self.budget, self.stages)

    def bodies(self, record: dict) -> dict:
        """An exchange's stages alone (no filters, no output): the record, finished in place."""
        if RAW in record:
            self.budget.next_unit()
            for stage in self.stages:
                stage(record, self.topics, self.budget)
        return record


def decoded_records(run, progress: Callable[[int], None] | None = None, pack_records: bool = False,
                    stages: tuple = ()) -> Iterator[dict]:
    """Every record of a pipeline.DecodeRun in order, exchanges finished (no filters, no output
    shaping): those ``run.keep_record`` keeps when it has one, the others' exchanges finished only
    when their response may teach topic names (TOPIC_NAMING), and not given out.
    ``pack_records``: see Finish. The run's ``flows_report`` reads the budget (run.budget)."""
    finish = Finish(run.topics, run.limits, pack_records=pack_records, stages=stages)
    run.budget = finish.budget
    keep = run.keep_record
    if keep is None:
        for record in run.raw_records(progress):
            yield finish.bodies(record)
        return
    for record in run.raw_records(progress):
        mine = keep(record)
        if RAW in record and not mine:
            if record["api_version"] >= TOPIC_NAMING.get(record["api_key"], 1 << 15):
                finish.budget.next_unit()
                complete(record, run.topics, finish.budget)  # for its topic names alone
            continue
        if mine:
            yield finish.bodies(record)
