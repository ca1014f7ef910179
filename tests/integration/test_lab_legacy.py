"""Client truth from Apache Kafka: `kinspect decode --json` on legacy (magic 0/1) and v2 traffic.

The recipes of tests/lab/legacy_recipes.py are recorded fresh (Kafka 3.9.2 in ZooKeeper mode
with kafka-python pinned to 0.8.2, 0.9, 0.10.0 and 0.10.1; Kafka 4.1.2 with librdkafka; on
loopback and on the MTU 1500 veth), and the committed pcaps/kafka39-*, kafka41-* are read again.
For each, the clients' manifests are the oracle: every produced value is in a Produce request
and, with the offset the consumer reported, in a Fetch response; compressed wrappers are
expanded; every CRC is valid; requests per (api_key, api_version) are what the clients logged;
no error or warning. Independently of kinspect, tshark counts the same requests and the raw
bytes show magic 0's lz4 frames with the pre-KIP-57 header checksum.
"""

import importlib
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.lab import capinfo, checks, legacy_checks, legacy_readme, tshark_counts
from tests.lab.legacy_recipes import BY_NAME, RECIPES, manifest_name, record
from tests.lab.pytest_fixtures import PCAPS, decoded, require_lab_host  # noqa: F401  (fixture)

pytestmark = pytest.mark.lab

SOURCES = [(source, r.name) for source in ("fresh", "committed") for r in RECIPES]
LEGACY_SOURCES = [(s, name) for s, name in SOURCES if BY_NAME[name].metadata == "zookeeper"]
VETH_SOURCES = [(s, name) for s, name in SOURCES if BY_NAME[name].network == "veth"]
ALL_LEVELS = "kafka39-legacy"  # the loopback recipe: kafka-python at all four legacy levels
LINK_HEADER_BYTES = {"ether": 14, "linux-sll2": 20}
MAX_FILE_BYTES = 300 * 1024
# Produce v0-v2 and Fetch v0-v3: every request version that carries magic 0 or 1 message sets
LEGACY_RECORD_VERSIONS = {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)}


def _ids(sources):
    return [f"{source}:{name}" for source, name in sources]


@pytest.fixture(scope="session")
def xxhash_installed():
    """kafka-python writes magic-0 lz4 only with xxhash, and the KIP-57 oracle needs it too."""
    try:
        return importlib.import_module("xxhash")
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "xxhash"], check=True)
        importlib.invalidate_caches()
        return importlib.import_module("xxhash")


@pytest.fixture(scope="session")
def fresh_legacy_capture(tmp_path_factory, xxhash_installed):
    """name → (capture, manifest), recorded once per session; a failed recording fails every
    test that wants it without being tried again."""
    cache: dict[str, tuple[Path, dict] | Exception] = {}
    directory = tmp_path_factory.mktemp("lab-legacy-captures")

    def get(name: str) -> tuple[Path, dict]:
        if name not in cache:
            require_lab_host()
            try:
                manifest = json.loads(record(BY_NAME[name], directory).read_text())
                cache[name] = (directory / manifest["file"], manifest)
            except Exception as exc:  # noqa: BLE001  (re-raised below, for every test)
                cache[name] = exc
        if isinstance(cache[name], Exception):
            raise cache[name]
        return cache[name]

    return get


@pytest.fixture(scope="session")
def committed_legacy_capture():
    def get(name: str) -> tuple[Path, dict]:
        manifest_path = PCAPS / manifest_name(name)
        assert manifest_path.exists(), f"{manifest_path} is missing: python tools/record_legacy_pcaps.py"
        manifest = json.loads(manifest_path.read_text())
        return PCAPS / manifest["file"], manifest

    return get


def _get(request, source: str, name: str) -> tuple[Path, dict]:
    return request.getfixturevalue(f"{source}_legacy_capture")(name)


@pytest.fixture(params=SOURCES, ids=_ids(SOURCES))
def capture(request):
    return _get(request, *request.param)


@pytest.fixture(params=LEGACY_SOURCES, ids=_ids(LEGACY_SOURCES))
def legacy_capture(request):
    return _get(request, *request.param)


@pytest.fixture(params=VETH_SOURCES, ids=_ids(VETH_SOURCES))
def veth_capture(request):
    return _get(request, *request.param)


# -- what the lab recorded, without kinspect ------------------------------------------------------


def test_clients_did_what_the_recipe_expects(capture):
    _, manifest = capture
    values = [p["value"] for c in manifest["clients"] for p in c["produced"]]
    assert values and len(values) == len(set(values))
    for client in manifest["clients"]:
        assert client["consumer_error"] is None and not client["notes"], client["notes"]
        produced = client["produced"]
        assert produced and all(p["delivered"] for p in produced), [p["error"] for p in produced]
        assert {c["value"] for c in client["consumed"]} == {p["value"] for p in produced}
        last = defaultdict(lambda: -1)
        for c in client["consumed"]:
            last[c["partition"]] = max(last[c["partition"]], c["offset"])
        committed = {c["partition"]: c["offset"] for c in client["committed"]}
        assert {p: committed.get(p) for p in last} == {p: o + 1 for p, o in last.items()}


def test_capture_holds_exactly_the_requests_the_clients_logged(capture):
    """tshark's count per (api_key, api_version): no request from anyone but the clients."""
    path, manifest = capture
    port = int(manifest["broker"]["bootstrap"].rsplit(":", 1)[1])
    assert tshark_counts.kafka_requests(path, port) == checks.client_tally(manifest, "sent")


def test_veth_captures_hold_real_1500_byte_segments(veth_capture):
    _, manifest = veth_capture
    info = manifest["file_info"]
    assert manifest["capture"]["mtu"] == 1500
    assert info["max_frame_len"] == 1500 + LINK_HEADER_BYTES[info["encapsulation"]]


@pytest.mark.parametrize("source", ["fresh", "committed"])
def test_legacy_recipe_uses_every_legacy_record_version(source, request):
    """Its clients sent Produce v0-v2 and Fetch v0-v3, every version that carries magic 0/1."""
    _, manifest = _get(request, source, ALL_LEVELS)
    sent = {kv for kv, n in checks.client_tally(manifest, "sent").items() if n}
    assert LEGACY_RECORD_VERSIONS <= sent


def test_magic_0_lz4_frames_have_the_kip57_checksum(legacy_capture, xxhash_installed):
    """Raw bytes: magic 0 wrappers' lz4 frames use the old header checksum, magic 1 the spec's."""
    lz4_frames = importlib.import_module("tests.lab.lz4_frames")
    path, _ = legacy_capture
    kinds = Counter((f.message_magic, f.kind) for f in lz4_frames.capture_frames(path))
    assert kinds[(0, "kip57")] and kinds[(1, "spec")], kinds
    assert set(kinds) <= {(0, "kip57"), (1, "spec"), (0, "either"), (1, "either")}, kinds


@pytest.mark.parametrize("name", [r.name for r in RECIPES])
def test_committed_file_is_small_described_and_what_its_manifest_says(name, committed_legacy_capture):
    path, manifest = committed_legacy_capture(name)
    sizes = {p.name: p.stat().st_size for p in (path, PCAPS / manifest_name(name))}
    assert all(size < MAX_FILE_BYTES for size in sizes.values()), sizes
    recorded = manifest["file_info"]
    assert capinfo.describe(path).to_dict() == recorded
    assert (recorded["format"], recorded["encapsulation"]) == \
        (BY_NAME[name].fmt, BY_NAME[name].encapsulation)
    for readme in (legacy_readme.FILE, "README.md"):
        assert f"`{path.name}`" in (PCAPS / readme).read_text(), f"pcaps/{readme} misses {path.name}"


# -- kinspect decode --json against the clients -----------------------------------------------------


@pytest.mark.parametrize("check", sorted(checks.ALL_CHECKS))
def test_decode_agrees_with_the_clients(capture, decoded, check):
    """Request counts, responses paired, produced values (topic, key, partition), consumed
    values, committed offsets: tests/lab/checks.py."""
    path, manifest = capture
    failures = checks.ALL_CHECKS[check](decoded(path), manifest)
    assert not failures, "\n".join(failures[:40])


@pytest.mark.parametrize("check", sorted(legacy_checks.ALL_CHECKS))
def test_decode_shows_the_message_sets(capture, decoded, check):
    """Magic and codec per topic and direction, CRCs, expanded wrappers and batches, fetched
    offsets, no error or warning: tests/lab/legacy_checks.py."""
    path, manifest = capture
    failures = legacy_checks.ALL_CHECKS[check](decoded(path), manifest)
    assert not failures, "\n".join(failures[:40])


@pytest.mark.parametrize("source", ["fresh", "committed"])
def test_log_append_time_reaches_inner_messages(source, request, decoded):
    """A LogAppendTime topic (magic 1): the broker's append time, from the Produce responses,
    is every fetched record's timestamp, inner messages of compressed wrappers included."""
    path, manifest = _get(request, source, ALL_LEVELS)
    failures = legacy_checks.check_log_append_time(decoded(path), manifest)
    assert not failures, "\n".join(failures[:40])


def test_every_produced_value_is_fetched_back(capture, decoded):
    path, manifest = capture
    fetched = checks.fetched_values(decoded(path))
    missing = [p["value"][:60] for c in manifest["clients"] for p in c["produced"]
               if p["value"] not in fetched]
    assert not missing, missing[:20]


def test_decode_finds_every_lz4_wrapper_the_bytes_hold(legacy_capture, decoded, xxhash_installed):
    """kinspect's lz4 wrappers per magic, both directions, are the raw scan's frames."""
    lz4_frames = importlib.import_module("tests.lab.lz4_frames")
    path, _ = legacy_capture
    raw = Counter(f.message_magic for f in lz4_frames.capture_frames(path))
    assert legacy_checks.lz4_wrappers(decoded(path)) == raw


def test_legacy_broker_answers_without_errors(legacy_capture, decoded):
    """With topics and group coordinator ready before the capture, Kafka 3.9 answered every
    legacy request with error 0: an error code here is a misread field."""
    path, _ = legacy_capture
    errors = [(e["api_name"], e["api_version"], e["correlation_id"], e["error_codes"])
              for e in decoded(path).exchanges if e["error_codes"]]
    assert not errors, errors[:20]


def test_checks_catch_a_damaged_wrapper(committed_legacy_capture, tmp_path, xxhash_installed):
    """One flipped byte in the first lz4 frame of the loopback capture: the checks must see it."""
    lz4_frames = importlib.import_module("tests.lab.lz4_frames")
    path, _ = committed_legacy_capture(ALL_LEVELS)
    data = bytearray(path.read_bytes())
    at = data.find(lz4_frames.FRAME_MAGIC)
    assert at > 0
    data[at + 12] ^= 0xFF  # inside the first block, past the frame header
    damaged = tmp_path / path.name
    damaged.write_bytes(data)
    result = checks.decode(damaged)
    assert legacy_checks.check_crcs(result)
    assert legacy_checks.check_no_bad_problems(result)
