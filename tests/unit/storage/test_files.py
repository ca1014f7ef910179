from pathlib import Path

from kinspect.storage.files import companion, describe


def test_kinds_and_names():
    info = describe(Path("logs/orders-eu-3/00000000000000001234.log"))
    assert (info.kind, info.base_offset, info.topic, info.partition) == ("log", 1234,
                                                                        "orders-eu", 3)
    snapshot = describe(Path("m/__cluster_metadata-0/00000000000000000042-0000000001.checkpoint"))
    assert (snapshot.kind, snapshot.base_offset, snapshot.snapshot_epoch) == ("kraft_snapshot",
                                                                               42, 1)
    assert snapshot.records_topic == "__cluster_metadata"
    assert describe(Path("logs/bootstrap.checkpoint")).records_topic == "__cluster_metadata"
    assert describe(Path("l/__consumer_offsets-7/00000000000000000000.index")).records_topic \
        == "__consumer_offsets"
    assert describe(Path("l/t-0/00000000000000000000.log")).records_topic is None
    for name, kind in (("leader-epoch-checkpoint", "leader_epoch_checkpoint"),
                       ("recovery-point-offset-checkpoint", "offset_checkpoint"),
                       ("partition.metadata", "partition_metadata"),
                       ("00000000000000000009.snapshot", "producer_snapshot"),
                       ("00000000000000000000.txnindex", "txnindex"),
                       ("quorum-state", "quorum_state"), ("notes.txt", None)):
        assert describe(Path("d/t-0") / name).kind == kind


def test_renamed_files_and_deleted_directories():
    info = describe(Path("l/a-b-0.0123456789abcdef0123456789abcdef-delete/"
                         "00000000000000000000.log.deleted"))
    assert (info.kind, info.renamed, info.directory_state, info.topic) == (
        "log", ".deleted", "delete", "a-b")
    assert describe(Path("x/00000000000000000000.log.swap"), "index").kind == "index"


def test_companion():
    assert companion(Path("d/00000000000000000010.timeindex"), ".log") == \
        Path("d/00000000000000000010.log")


def test_a_bare_name_inside_a_partition_directory_keeps_its_topic(tmp_path, monkeypatch):
    partition = tmp_path / "__consumer_offsets-24"
    partition.mkdir()
    (partition / "00000000000000000000.log").write_bytes(b"")
    monkeypatch.chdir(partition)
    info = describe(Path("00000000000000000000.log"))
    assert (info.topic, info.partition) == ("__consumer_offsets", 24)
    (tmp_path / "elsewhere.log").symlink_to(partition / "00000000000000000000.log")
    assert describe(tmp_path / "elsewhere.log").topic == "__consumer_offsets"
