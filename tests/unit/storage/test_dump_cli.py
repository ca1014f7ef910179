"""The kinspect dump command (kinspect/cli/dump.py), run through click."""

import base64
import json

import pytest
from click.testing import CliRunner

from kinspect.cli.dump import dump
from tests.conftest import SAMPLES
from tests.unit.storage.conftest import (KAFKA4, SEGMENT, TXN_SEGMENT, dump_lines, need, oracle_batches,
                                         oracle_index)
from tests.unit.storage.metadata_records import (JAAS, JAAS_PASSWORD, SALT, SECRET_VALUES, SERVER_KEY,
                                                 STORED_KEY, metadata_segment)


def run(*args):
    result = CliRunner().invoke(dump, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_json_lines_for_a_partition_directory():
    directory = need(TXN_SEGMENT.parent)
    code, out, _ = run("--json", directory)
    lines = [json.loads(line) for line in out.splitlines()]
    files = [e["file"] for e in lines if e["type"] == "file"]
    assert files == sorted(str(p) for p in directory.iterdir() if not p.name.endswith(".dump.txt"))
    assert code == 0
    assert sum(e["type"] == "batch" for e in lines) == len(oracle_batches(TXN_SEGMENT))


def test_table_output_with_data(tmp_path):
    code, out, _ = run("--data", TXN_SEGMENT)
    assert code == 0
    records = [line for line in dump_lines(TXN_SEGMENT) if line.startswith("| offset: ")]
    offsets = [int(line.split()[2]) for line in records]
    first_value = records[0].split(" payload: ")[1]
    assert f"value={first_value}" in out
    assert (f"{len(oracle_batches(TXN_SEGMENT))} batches, {len(records)} records, "
            f"offsets {offsets[0]}..{offsets[-1]}; no problems") in out


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
    data = TXN_SEGMENT.read_bytes()
    at = oracle_batches(TXN_SEGMENT)[2]["position"]
    damaged.write_bytes(data[:at] + b"garbage!" * 10 + data[at:])
    code, out, _ = run(damaged)
    assert code == 1
    assert f"{at} DAMAGE: 80 bytes skipped to the next valid batch at {at + 80}" in out
    code, out, _ = run("--json", damaged)
    damage = [json.loads(line) for line in out.splitlines() if '"damage"' in line][0]
    assert (damage["type"], damage["position"], damage["size"], damage["resumed_at"]) == (
        "damage", at, 80, at + 80)


def test_strict_fails_on_warnings(tmp_path):
    sample = KAFKA4 / "__cluster_metadata-0" / "00000000000000000000.index"
    assert oracle_index(sample)  # entries that cannot be checked: no .log beside the copy
    index = tmp_path / sample.name
    index.write_bytes(sample.read_bytes())
    assert run(index)[0] == 0
    assert run("--strict", index)[0] == 1


def test_unreadable_and_unknown_files_exit_3(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = run(tmp_path / "notes.txt")
    assert code == 3 and "--type KIND" in err
    code, _, err = run(tmp_path / "missing.log")
    assert code == 3 and "no such file" in err.lower()
    code, _, _ = run("--type", "log", tmp_path / "notes.txt")
    assert code == 1  # read as a segment: 5 bytes of damage


def test_usage_errors_exit_2():
    directory = need(TXN_SEGMENT.parent)
    assert run("--format", "kafka", "--json", directory)[0] == 2
    assert run("--decode", "yaml", directory)[0] == 2


# -- secrets of __cluster_metadata -----------------------------------------------------------------

SECRETS = (JAAS_PASSWORD.encode(), SALT, STORED_KEY, SERVER_KEY)
OUTPUTS = [["--data"], ["--data", "--decode", "text"], ["--data", "--decode", "hex"],
           ["--data", "--decode", "json"], ["--json", "--data"], ["--json", "--data", "--decode", "hex"],
           ["--format", "kafka", "--data"], ["--data", "--no-internal"],
           ["--json", "--data", "--no-internal"],
           ["--format", "kafka", "--data", "--no-internal"], ["--data", "--max-records", "1"],
           ["--json", "--data", "--max-records", "1"], ["--format", "kafka", "--data", "--max-records", "1"],
           ["--records"], ["--json", "--records"], ["--format", "kafka"]]


def _forms(secret: bytes) -> tuple[str, ...]:
    """How a secret can show: text, hex (--decode hex), base64 (kafka format, JSON of bytes)."""
    return secret.decode(), secret.hex(), base64.b64encode(secret).decode()


@pytest.fixture(params=["log", "snapshot"])
def metadata_file(request, tmp_path):
    directory = tmp_path / "__cluster_metadata-0"
    directory.mkdir()
    name = SEGMENT if request.param == "log" else "00000000000000000005-0000000001.checkpoint"
    path = directory / name
    path.write_bytes(metadata_segment())
    return path


@pytest.mark.parametrize("args", OUTPUTS, ids=" ".join)
def test_cluster_metadata_secrets_are_redacted_unless_show_secrets(metadata_file, args):
    _, hidden, _ = run(*args, metadata_file)
    _, shown, _ = run(*args, "--show-secrets", metadata_file)
    for secret in SECRETS:
        assert not any(form in hidden for form in _forms(secret)), (secret, hidden)
    if "--data" not in args:  # no values at all: the same output
        assert hidden == shown
        return
    shortened = args[:3] == ["--data", "--decode", "hex"]  # the table cuts a value at 200 characters
    for secret in SECRETS[shortened:]:
        assert any(form in shown for form in _forms(secret)), (secret, shown)
    assert "<redacted" in hidden and "<redacted" not in shown
    for kept in (b"tok-1", b"log.retention.ms"):  # records holding nothing secret stay whole
        assert any(form in hidden for form in _forms(kept)), (kept, hidden)
    if "--no-internal" not in args and "--decode" not in args:  # records shown decoded
        assert "alice" in hidden and "sasl.jaas.config" in hidden  # who and which config stay


def test_cluster_metadata_secrets_keep_their_shape(tmp_path):
    directory = tmp_path / "__cluster_metadata-0"
    directory.mkdir()
    (directory / SEGMENT).write_bytes(metadata_segment())
    _, out, _ = run("--json", "--data", directory / SEGMENT)
    records = next(json.loads(line) for line in out.splitlines() if '"batch"' in line)["records"]
    config, _, _, scram, _ = (r["value"]["data"] for r in records)
    assert config["value"] == f"<redacted {len(JAAS)} bytes>"
    assert scram == {"name": "alice", "mechanism": 2, "salt": f"<redacted {len(SALT)} bytes>",
                     "stored_key": f"<redacted {len(STORED_KEY)} bytes>",
                     "server_key": f"<redacted {len(SERVER_KEY)} bytes>", "iterations": 4096}
    assert records[0]["value_size"] == len(SECRET_VALUES[0])  # the size stays the stored one
    _, out, _ = run("--json", "--data", "--no-internal", directory / SEGMENT)
    records = next(json.loads(line) for line in out.splitlines() if '"batch"' in line)["records"]
    assert [r["value"].startswith("<redacted ") for r in records] == [True, False, False, True, False]
    _, out, _ = run("--format", "kafka", "--data", directory / SEGMENT)
    assert f'"name":"alice","mechanism":2,"salt":"<redacted {len(SALT)} bytes>"' in out
