"""kinspect offsets as kafka-consumer-groups users type it: its options on `offsets --help`, and
--group, --describe, --list and --bootstrap-server taken as that tool takes them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import SAMPLES

LOGS = SAMPLES / "kafka-4.1.2/logs"


def kinspect(*args):
    return subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_offsets_help_shows_the_options():
    shown = kinspect("offsets", "--help").stdout
    for option in ("--log-dir", "--capture", "--bootstrap-server", "--group", "--describe", "--list",
                   "--members", "--state", "--history", "--all-groups", "--json", "partition-for"):
        assert option in shown, option


@pytest.mark.parametrize("theirs, ours", [
    (["--describe", "--group", "group-classic"], ["group-classic"]),
    (["--group", "group-classic", "--describe", "--members"], ["group-classic", "--members"]),
    (["--list"], []),
    (["--describe"], ["--all-groups"]),
    (["--describe", "--all-groups", "--state"], ["--all-groups", "--state"]),
])
def test_kafka_consumer_groups_options_give_the_same_answer(theirs, ours):
    given = kinspect("offsets", *theirs, "--log-dir", LOGS)
    assert given.returncode == 0, given.stderr
    assert given.stdout == kinspect("offsets", *ours, "--log-dir", LOGS).stdout and given.stdout


def test_bootstrap_server_is_bootstrap():
    proc = kinspect("offsets", "--describe", "--group", "g", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2")
    assert proc.returncode == 3 and "127.0.0.1:1" in proc.stderr


@pytest.mark.parametrize("args", [["g", "--group", "h"], ["--list", "--group", "g"]])
def test_contradictions_are_usage_errors(args):
    assert kinspect("offsets", *args, "--log-dir", LOGS).returncode == 2


def test_partition_for_help_has_examples():
    shown = kinspect("offsets", "partition-for", "--help").stdout
    assert "Examples:" in shown and "kinspect offsets partition-for my-app" in shown
