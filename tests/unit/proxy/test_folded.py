"""The proxy's folded warnings (proxy/folded.py): a kind is said once, then counted, and the counts
said at the end."""

from kinspect.proxy.folded import Folded


def test_a_kind_is_said_once_then_counted():
    lines = []
    warnings = Folded(lines.append)
    assert warnings.warn(("listen", 98), "cannot listen for broker 1", "brokers not given a listener")
    for node in range(2, 100_001):
        assert not warnings.warn(("listen", 98), f"cannot listen for broker {node}", "brokers not given a listener")
    assert warnings.warn("other", "something else", "other things")
    warnings.ended()
    assert lines == ["warning: cannot listen for broker 1", "warning: something else",
                     "warning: 99,999 more brokers not given a listener (warned once above)"]
