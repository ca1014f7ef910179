"""The lab itself: fresh captures from Tansu and real clients are what the recipes say they are.

These hold without kinspect: capinfos/tshark read the files, the manifests say what the clients
did, and tshark's Kafka dissector must count exactly the requests the clients logged.
"""

from collections import defaultdict

import pytest

from tests.lab import checks, tshark_counts
from tests.lab.pytest_fixtures import fresh_capture  # noqa: F401  (fixture)
from tests.lab.recipes import BY_NAME, RECIPES

pytestmark = pytest.mark.lab

NAMES = [r.name for r in RECIPES]
LINK_HEADER_BYTES = {"ether": 14, "linux-sll2": 20}


@pytest.mark.parametrize("name", NAMES)
def test_capture_has_the_recipes_format_and_link_type(name, fresh_capture):
    capture, manifest = fresh_capture(name)
    recipe = BY_NAME[name]
    info = manifest["file_info"]
    assert capture.name == recipe.filename
    assert (info["format"], info["encapsulation"]) == (recipe.fmt, recipe.encapsulation)
    if recipe.network == "veth":
        # Full 1500-byte IP packets and nothing larger: messages were really cut into segments.
        assert info["max_frame_len"] == 1500 + LINK_HEADER_BYTES[recipe.encapsulation]
        assert manifest["capture"]["mtu"] == 1500


@pytest.mark.parametrize("name", NAMES)
def test_capture_holds_exactly_the_requests_the_clients_logged(name, fresh_capture):
    capture, manifest = fresh_capture(name)
    port = int(manifest["broker"]["bootstrap"].rsplit(":", 1)[1])
    assert tshark_counts.kafka_requests(capture, port) == checks.client_tally(manifest, "sent")


@pytest.mark.parametrize("name", NAMES)
def test_clients_did_what_the_recipe_expects(name, fresh_capture):
    _, manifest = fresh_capture(name)
    values = [p["value"] for c in manifest["clients"] for p in c["produced"]]
    assert values and len(values) == len(set(values))
    for client in manifest["clients"]:
        expect = client["expect"]
        assert any(r["api_key"] == checks.PRODUCE and r["sent"] for r in client["requests"])
        delivered = [p for p in client["produced"] if p["delivered"]]
        if not expect["delivered"]:
            assert delivered == [], "Tansu accepted a legacy produce: update the recipe and README"
            continue
        assert len(delivered) == len(client["produced"]), client["notes"]
        if not expect["consumed"]:
            assert client["consumer_error"], "the legacy consumer worked: update recipe and README"
            continue
        assert client["consumer_error"] is None
        assert {c["value"] for c in client["consumed"]} == {p["value"] for p in delivered}
        # The group committed, per partition, one past the last offset it consumed there.
        last = defaultdict(lambda: -1)
        for c in client["consumed"]:
            last[(c["topic"], c["partition"])] = max(last[(c["topic"], c["partition"])], c["offset"])
        committed = {(c["topic"], c["partition"]): c["offset"] for c in client["committed"]}
        assert {tp: committed.get(tp) for tp in last} == {tp: o + 1 for tp, o in last.items()}
