"""The log dir reader over the committed samples: their transactions all ended."""

import pytest

from kinspect.doctor.logdir import LogDirUnreadable, read_transactions
from tests.conftest import SAMPLES


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.iterdir() if (p / "logs").is_dir()))
def test_the_samples_transactions_all_ended(sample):
    findings, notices, problems = read_transactions(SAMPLES / sample / "logs")
    assert (findings, notices) == ([], [])
    assert [p for p in problems if p.severity == "error"] == []


def test_not_a_log_dir(tmp_path):
    with pytest.raises(LogDirUnreadable, match="not a directory"):
        read_transactions(tmp_path / "missing")
    with pytest.raises(LogDirUnreadable, match="not a Kafka log dir"):
        read_transactions(tmp_path)
