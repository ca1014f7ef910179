"""The removed versions come from Kafka's message specs (3.9's request versions against 4.x's)."""

import json

from kinspect.doctor import kip896
from tests.conftest import SPECS


def _valid(path):
    text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("//"))
    spec = json.loads(text)
    if spec["validVersions"] == "none":  # defined, accepted in no version
        return spec["apiKey"], None
    low, _, high = spec["validVersions"].partition("-")
    return spec["apiKey"], (int(low), int(high or low))


def _versions(tree):
    return {key: span for key, span in map(_valid, (SPECS / tree / "clients").glob("*Request.json"))
            if span is not None}


def test_the_table_is_3_9_minus_4_x_for_every_request_spec():
    old, new = _versions("kafka-3.9.0"), _versions("kafka-4.2-snapshot")
    expected = {}
    for key, (low, high) in old.items():
        if key not in new:
            expected[key] = (low, high)
        elif new[key][0] > low:
            expected[key] = (low, new[key][0] - 1)
    assert kip896.REMOVED == expected


def test_the_kip_896_baselines():
    assert kip896.removed(0, 2) and not kip896.removed(0, 3)         # Produce v0-2
    assert kip896.removed(1, 3) and not kip896.removed(1, 4)         # Fetch v0-3
    assert kip896.removed(8, 1) and kip896.lowest_accepted(8) == 2   # OffsetCommit v0-1
    assert not kip896.removed(18, 0)                                 # ApiVersions v0 stays
    assert kip896.lowest_accepted(4) is None                         # LeaderAndIsr: gone with ZooKeeper
