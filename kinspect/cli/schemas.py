"""Schema-aware values for the commands that decode traffic (decode, sniff): their options, the
sources opened once, and the finishing stage (schemas/stage.py) of each input."""

from __future__ import annotations

import os

import click

from kinspect.cli.output import Output
from kinspect.limits import Limits
from kinspect.problems import EXIT_OK, EXIT_UNREADABLE


def schema_options(command):
    """--schemas SOURCE (``schema_sources``), --schemas-topic NAME and --raw-values."""
    for option in (
        click.option("--raw-values", is_flag=True,
                     help="Keys and values as their bytes, even when a schema decodes them."),
        click.option("--schemas-topic", default="_schemas", show_default=True, metavar="NAME",
                     help="The registry's topic (kafkastore.topic), in log dirs and captures."),
        click.option("--schemas", "schema_sources", multiple=True, metavar="SOURCE",
                     help="Decode Avro, Protobuf and JSON Schema keys and values framed with a schema "
                          "id, with the schemas of SOURCE too: a broker log dir or its _schemas-N "
                          "directory, a capture, a directory of .avsc/.proto/.json files named by id, "
                          "or an http(s):// registry. Repeatable. The traffic's own _schemas records "
                          "are read without it."),
    ):
        command = option(command)
    return command


def open_schemas(sources, topic: str, limits: Limits, out: Output, beside=()):
    """The schemas of --schemas SOURCE and, for dump and validate, of the registry's partitions
    beside the paths ``beside`` (a log dir, or a partition directory's or a segment's log dir):
    (Schemas, the exit code so far)."""
    from kinspect.schemas.load import open_sources
    near = []
    for path in beside:
        directory = path if os.path.isdir(path) else os.path.dirname(path) or "."  # isdir: False when unreadable
        near += [directory, os.path.dirname(os.path.abspath(directory))]
    with out.progress(None, "reading schemas"):
        schemas, problems = open_sources(sources, topic, log_dirs=near, limits=limits)
    for problem in problems:
        out.warn(f"kinspect: {problem.what}")
    return schemas, EXIT_UNREADABLE if problems else EXIT_OK


def schema_stage(schemas, topic: str, source: str | None, show_secrets: bool, notices, out: Output,
                 capture_options: dict):
    """The finishing stage of schema-aware values for one input (None: nothing to finish). A
    capture file that names the registry's topic is read once before (its _schemas records first,
    so that values sent before their schema decode too); stdin, pipes and live traffic (source
    None) learn them as they come."""
    from kinspect.decode.pipeline import CaptureUnreadable
    from kinspect.schemas.capture import read_capture
    from kinspect.schemas.stage import ValueStage, mentions
    regular = source is not None and source != "-" and os.path.isfile(source)
    if regular and mentions(source, topic, capture_options.get("limits")):
        try:
            with out.progress(None, f"reading {topic} records"):
                read_capture(source, schemas.store, topic, **capture_options)
            return ValueStage(schemas, topic, show_secrets, learn=False, notices=notices)
        except CaptureUnreadable:
            pass  # the decode itself says why
    elif regular and not len(schemas.store) and schemas.fallback is None:
        return None  # no schema anywhere: nothing to finish
    return ValueStage(schemas, topic, show_secrets, learn=True, notices=notices)


def write_notices(schemas, notices, out: Output) -> list[dict]:
    """The run's schema notices, each once (those of worker processes too), written and returned."""
    from kinspect.schemas.stage import all_notices
    written = all_notices(schemas, notices)
    for shown in written:
        if out.as_json:
            out.record({"type": "notice", **shown})
        out.warn(f"kinspect: {shown['what']}")
    if notices is not None:
        notices.close()
    return written
