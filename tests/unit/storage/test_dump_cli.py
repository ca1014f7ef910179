"""The kinspect dump command (kinspect/cli/dump.py), run through click."""

import json

import pytest
from click.testing import CliRunner

from kinspect.cli.dump import dump
from tests.conftest import SAMPLES
from tests.unit.storage.conftest import KAFKAFUN, SEGMENT, SOC


def run(*args):
    result = CliRunner().invoke(dump, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_json_lines_for_a_partition_directory():
    code, out, _ = run("--json", SOC)
    lines = [json.loads(line) for line in out.splitlines()]
    files = [e["file"] for e in lines if e["type"] == "file"]
    assert files == sorted(files) and len(files) == 6
    assert code == 0
    assert sum(e["type"] == "batch" for e in lines) == 2273


def test_table_output_with_data(tmp_path):
    code, out, _ = run("--data", KAFKAFUN / "first-1" / SEGMENT)
    assert code == 0
    assert "value=hello" in out and "9 batches, 11 records, offsets 0..10; no problems" in out


def test_kafka_format_equals_the_sample_dump(monkeypatch):
    directory = SAMPLES / "kafka-4.1.2" / "logs" / "transactions-0"
    dump_txt = directory / "00000000000000000000.log.dump.txt"
    if not dump_txt.exists():
        pytest.fail("samples/ is missing: it is committed (tools/make_samples.py regenerates it)")
    monkeypatch.chdir(dump_txt.parent)
    code, out, err = run("--format", "kafka", "--data", "00000000000000000000.log")
    assert code == 0 and err == ""
    assert out == dump_txt.read_text()


def test_damaged_segment_exits_1_and_says_where(tmp_path):
    damaged = tmp_path / SEGMENT
    data = (KAFKAFUN / "first-1" / SEGMENT).read_bytes()
    damaged.write_bytes(data[:149] + b"garbage!" * 10 + data[149:])
    code, out, _ = run(damaged)
    assert code == 1
    assert "149 DAMAGE: 80 bytes skipped to the next valid batch at 229" in out
    code, out, _ = run("--json", damaged)
    damage = [json.loads(line) for line in out.splitlines() if '"damage"' in line][0]
    assert (damage["type"], damage["position"], damage["size"], damage["resumed_at"]) == (
        "damage", 149, 80, 229)


def test_strict_fails_on_warnings(tmp_path):
    index = tmp_path / "00000000000000000000.index"
    index.write_bytes((SOC / index.name).read_bytes())
    assert run(index)[0] == 0
    assert run("--strict", index)[0] == 1


def test_unreadable_and_unknown_files_exit_3(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = run(tmp_path / "notes.txt")
    assert code == 3 and "--type KIND" in err
    code, _, err = run(tmp_path / "missing.log")
    assert code == 3 and "no such file" in err
    code, _, _ = run("--type", "log", tmp_path / "notes.txt")
    assert code == 1  # read as a segment: 5 bytes of damage


def test_usage_errors_exit_2():
    assert run("--format", "kafka", "--json", SOC)[0] == 2
    assert run("--decode", "yaml", SOC)[0] == 2
