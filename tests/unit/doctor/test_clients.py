from kinspect.doctor.clients import Inventory
from kinspect.doctor.options import Thresholds
from kinspect.doctor.source import capture_records
from kinspect.decode.pipeline import DecodeRun
from tests.conftest import PCAPS
from tests.unit.doctor.handmade import exchange


def _rows(name):
    inventory = Inventory()
    for record in capture_records(DecodeRun(str(PCAPS / name))):
        inventory.exchange(record)
    return {r["client_id"]: r for r in inventory.rows()}


def test_software_from_api_versions_and_the_brokers_own_clients_marked():
    rows = _rows("java-transactions.pcap")
    producer = rows["producer-java-txn"]
    assert (producer["software_name"], producer["software_version"]) == ("apache-kafka-java", "4.1.2")
    assert producer["internal"] is False and producer["kip896_ready"] is True
    assert producer["connections"] == 2 and producer["addresses"] == ["127.0.0.1"]
    assert producer["produced_topics"] == ["java-lab"]
    assert {a["api_name"] for a in producer["apis"]} >= {"InitProducerId", "Produce", "EndTxn"}
    assert rows["broker-1-txn-marker-sender"]["internal"] is True
    assert rows["AddPartitionsManager-client-1"]["internal"] is True


def test_kip896_readiness_and_topics_of_pinned_clients():
    rows = _rows("kafka39-legacy.pcap")
    consumer = rows["kafka-python-0.9-consumer"]
    assert consumer["kip896_ready"] is False
    assert consumer["removed_versions"] == ["Fetch v1", "ListOffsets v0"]
    assert consumer["fetched_topics"] == ["lab-kafka-python-0.9"] and consumer["throttling_honoured"] is None


def test_clients_are_bounded_with_a_notice():
    inventory = Inventory(Thresholds(max_state=2))
    for i in range(5):
        inventory.exchange(exchange(3, {}, {}, client_id=f"c{i}", conn=f"10.0.0.{i}:1-10.0.0.9:9092"))
    assert len(inventory.rows()) == 2
    [notice, *_] = inventory.notices()
    assert notice["dropped"] == 3 and notice["state"] == "clients"
