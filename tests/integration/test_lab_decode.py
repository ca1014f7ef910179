"""`kinspect decode --json` against real clients: fresh lab captures and the committed pcaps/.

For each capture the clients' manifests are the oracle: requests per (api_key, api_version),
responses received, every produced value (with key, topic, partition, headers), every
consumed value, every committed offset.
"""

import pytest

from tests.lab import checks
from tests.lab.pytest_fixtures import (committed_capture, committed_names,  # noqa: F401
                                       decoded, fresh_capture)
from tests.lab.recipes import RECIPES

pytestmark = pytest.mark.lab

LEGACY_GROUPS = "kafka-python-legacy-groups"
SOURCES = [("fresh", r.name) for r in RECIPES] + [("committed", n) for n in committed_names()]


@pytest.fixture(params=SOURCES, ids=[f"{source}:{name}" for source, name in SOURCES])
def capture(request):
    source, name = request.param
    return request.getfixturevalue(f"{source}_capture")(name)


def test_decode_writes_only_json_objects(capture, decoded):
    path, _ = capture
    result = decoded(path)  # raises on a non-zero exit or a line that is not a JSON object
    assert result.exchanges, f"no exchanges decoded from {path.name}"


def test_exchange_lines_follow_the_contract(capture, decoded):
    path, _ = capture
    failures = checks.check_exchange_shape(decoded(path))
    assert not failures, "\n".join(failures[:40])


@pytest.mark.parametrize("check", sorted(checks.ALL_CHECKS))
def test_decode_agrees_with_the_clients(capture, decoded, check):
    path, manifest = capture
    failures = checks.ALL_CHECKS[check](decoded(path), manifest)
    assert not failures, "\n".join(failures[:40])


@pytest.mark.parametrize("source", ["fresh", "committed"])
def test_tansus_malformed_list_offsets_v0_response_is_reported(source, request, decoded):
    """Tansu omits old_style_offsets from ListOffsets v0 responses; tshark calls them malformed."""
    path, _ = request.getfixturevalue(f"{source}_capture")(LEGACY_GROUPS)
    answered_v0 = [e for e in decoded(path).exchanges
                   if (e["api_key"], e["api_version"]) == (2, 0) and e["response"] is not None]
    assert answered_v0
    for exchange in answered_v0:
        assert any(p.get("severity") == "error" for p in exchange["problems"]), exchange
