"""The committed captures in pcaps/: small, documented, what their manifests say, and together
covering the link types, file formats, networks and client libraries the decoder must handle."""

import json

import pytest

from tests.lab import capinfo, checks, tshark_counts
from tests.lab.pytest_fixtures import PCAPS, committed_capture, committed_names  # noqa: F401

pytestmark = pytest.mark.lab

NAMES = committed_names()
MAX_FILE_BYTES = 300 * 1024
MAX_TOTAL_BYTES = 2 * 1024 * 1024
DEMO = "librdkafka-produce-consume"


def manifests() -> list[dict]:
    return [json.loads((PCAPS / f"{n}.manifest.json").read_text()) for n in NAMES]


def test_fixtures_cover_formats_link_types_networks_and_clients():
    seen = manifests()
    assert {m["file_info"]["format"] for m in seen} >= {"pcap", "pcapng"}
    assert {m["file_info"]["encapsulation"] for m in seen} >= {"ether", "linux-sll2"}
    assert {m["capture"]["network"] for m in seen} >= {"loopback", "veth"}
    assert {c["client"] for m in seen for c in m["clients"]} >= {"librdkafka", "kafka-python", "aiokafka"}
    assert DEMO in NAMES


def test_fixtures_are_small():
    sizes = {m["file"]: (PCAPS / m["file"]).stat().st_size for m in manifests()}
    assert all(size < MAX_FILE_BYTES for size in sizes.values()), sizes
    assert sum(sizes.values()) < MAX_TOTAL_BYTES, sizes


def test_readme_describes_every_fixture():
    readme = (PCAPS / "README.md").read_text()
    missing = [m["file"] for m in manifests() if m["file"] not in readme]
    assert not missing, f"pcaps/README.md does not describe {missing}"


@pytest.mark.parametrize("name", NAMES)
def test_file_is_what_its_manifest_says(name, committed_capture):
    capture, manifest = committed_capture(name)
    info = capinfo.describe(capture).to_dict()
    recorded = manifest["file_info"]
    assert {k: info[k] for k in ("format", "encapsulation", "packets", "max_frame_len")} == \
        {k: recorded[k] for k in ("format", "encapsulation", "packets", "max_frame_len")}
    assert (info["format"], info["encapsulation"]) == \
        (manifest["capture"]["format"], manifest["capture"]["encapsulation"])


@pytest.mark.parametrize("name", NAMES)
def test_file_holds_exactly_the_requests_the_clients_logged(name, committed_capture):
    capture, manifest = committed_capture(name)
    port = int(manifest["broker"]["bootstrap"].rsplit(":", 1)[1])
    assert tshark_counts.kafka_requests(capture, port) == checks.client_tally(manifest, "sent")
