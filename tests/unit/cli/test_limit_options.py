"""The bound options reach the decoders: a bound lowered on the command line cuts, and the
output names the option that raises it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kinspect import limits
from kinspect.cli import cli
from tests.conftest import SAMPLES

SEGMENT = SAMPLES / "kafka-4.1.2" / "logs" / "record-shapes-0" / "00000000000000000000.log"


@pytest.mark.parametrize("command", (["validate", "--json"], ["dump", "--records", "--json"]))
def test_records_per_byte_cuts_records_past_the_floor(monkeypatch, command):
    monkeypatch.setattr(limits, "RECORDS_FLOOR", 5)
    result = CliRunner().invoke(cli, [*command, "--max-records-per-byte", "0", str(SEGMENT)])
    assert result.exit_code == 1, result.output
    assert "--max-records-per-byte" in result.stdout and '"records_cut"' in result.stdout
    uncut = CliRunner().invoke(cli, [*command, str(SEGMENT)])
    assert '"records_cut"' not in uncut.stdout and uncut.exit_code == 0


def test_every_record_is_kept_by_default_and_the_cut_ones_are_not_written(monkeypatch):
    monkeypatch.setattr(limits, "RECORDS_FLOOR", 5)
    result = CliRunner().invoke(cli, ["dump", "--records", "--json", "--max-records-per-byte", "0",
                                      str(SEGMENT)])
    batches = [json.loads(line) for line in result.stdout.splitlines()
               if json.loads(line).get("type") == "batch"]
    assert sum(len(b.get("records") or ()) for b in batches) == 5
