from kinspect.groups import describe
from kinspect.groups.model import CONSUMER, Commit, Group, GroupsView, Member

TOPIC_ID = "qL8LmO6JQ-mJYycuWTXbAg"


def view_with_a_member():
    group = Group("g", CONSUMER)
    group.offsets[("orders", 0)] = Commit("g", "orders", 0, 5, commit_timestamp=1_700_000_000_123,
                                          record_offset=9, source="/x/__consumer_offsets-3/0.log",
                                          position=120)
    group.offsets[("orders", 2)] = Commit("g", "orders", 2, 7)
    group.members["m"] = Member("m", client_id="c", client_host="/10.0.0.1", member_epoch=4,
                                assignment=[(TOPIC_ID, 1), (TOPIC_ID, 0)])
    view = GroupsView(groups={"g": group}, topic_names={TOPIC_ID: "orders"},
                      log_end_offsets={("orders", 0): 8, ("orders", 1): 3})
    view.history = list(group.offsets.values())
    return view, group


def test_offset_rows_join_commits_owners_and_log_ends_like_kafka_consumer_groups():
    view, group = view_with_a_member()
    rows = describe.offset_rows(view, group)
    assert [(r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"],
             r["consumer_id"]) for r in rows] == [
        ("orders", 0, 5, 8, 3, "m"), ("orders", 1, None, 3, None, "m"),
        ("orders", 2, 7, None, None, None)]
    assert rows[0]["committed_at"] == "2023-11-14T22:13:20.123Z"


def test_member_rows_name_topic_ids_and_group_partitions_by_topic():
    view, group = view_with_a_member()
    [row] = describe.member_rows(view, group)
    assert row["assignment"] == {"orders": [0, 1]} and row["partitions"] == 2
    assert row["target_assignment"] is None


def test_history_rows_say_which_batch():
    view, _ = view_with_a_member()
    rows = describe.history_rows(view, "g")
    assert rows[0]["batch"] == "__consumer_offsets-3/0.log@120"
    assert rows[1]["batch"] is None and rows[1]["producer_id"] is None


def test_times_that_cannot_be_shown():
    assert describe.iso_time(None) is None and describe.iso_time(-1) is None
    assert describe.iso_time(10**20) is None
