from kinspect.doctor.finding import INFO, WARNING
from kinspect.doctor.rebalance import Rebalance
from tests.unit.doctor.handmade import exchange, heartbeat, join, leave, sync


def _run(records):
    check = Rebalance()
    for record in records:
        check.exchange(record)
    return list(check.finish(max(r["request_time"] for r in records) + 1))


def test_a_group_that_formed_once_and_left_is_no_finding():
    assert _run([join("g", "a", 1, 10.0, ["a"]), sync("g", "a", 1, 10.1), heartbeat("g", "a", 1, 13.0),
                 leave("g", "a", 20.0)]) == []


def test_a_join_and_a_clean_leave_are_two_rebalances_at_info():
    records = [
        join("g", "a", 1, 10.0, ["a"]), sync("g", "a", 1, 10.1),
        heartbeat("g", "a", 1, 14.0, error=27),                       # b joins: a is told to rejoin
        join("g", "a", 2, 14.1, ["a", "b"]), join("g", "b", 2, 14.2), sync("g", "a", 2, 14.5), sync("g", "b", 2, 15.0),
        leave("g", "b", 20.0, reason="the consumer is being closed"),
        heartbeat("g", "a", 2, 21.0, error=27),
        join("g", "a", 3, 21.2, ["a"]), sync("g", "a", 3, 21.4),
    ]
    [found] = _run(records)
    assert found["severity"] == INFO
    assert (found["group"], found["rebalances"], found["members"], found["timed_out"]) == ("g", 2, 1, 0)
    reasons = {r["reason"] for r in found["reasons"]}
    assert "member b joined" in reasons
    assert "member b left (LeaveGroup: the consumer is being closed)" in reasons
    assert found["pause_ms"] == 1002 + 1402  # 14.0 → 15.002 and 20.0 → 21.402 (the responses)
    assert [r["generation"] for r in found["rounds"]] == [2, 3]


def test_a_member_that_vanished_timed_out_and_makes_a_warning():
    records = [
        join("g", "a", 1, 10.0, ["a", "c"]), join("g", "c", 1, 10.0), sync("g", "a", 1, 10.1), sync("g", "c", 1, 10.1),
        heartbeat("g", "c", 1, 12.0),                                  # c's last request: then killed
        heartbeat("g", "a", 1, 18.5, error=27),                        # its session (6 s) expired
        join("g", "a", 2, 18.6, ["a"]), sync("g", "a", 2, 18.7),
    ]
    [found] = _run(records)
    assert found["severity"] == WARNING
    assert (found["rebalances"], found["timed_out"]) == (1, 1)
    assert any(r["reason"].startswith("member c timed out (no LeaveGroup: its session expired after 6500 ms")
               for r in found["reasons"])


def test_many_planned_rebalances_make_a_warning_at_the_threshold():
    records = [join("g", "a", 1, 1.0, ["a"]), sync("g", "a", 1, 1.1)]
    for generation in range(2, 5):
        records += [join("g", "a", generation, generation * 10.0, ["a"], reason="metadata changed"),
                    sync("g", "a", generation, generation * 10.0 + 0.5)]
    [found] = _run(records)
    assert found["rebalances"] == 3 and found["severity"] == WARNING
    assert {"reason": "rejoin: metadata changed", "count": 3} in found["reasons"]


def _heartbeat848(group, member, asked, epoch, at, error=0, interval=1000):
    response = {"error_code": error, "member_id": member, "member_epoch": epoch, "heartbeat_interval_ms": interval}
    return exchange(68, {"group_id": group, "member_id": member, "member_epoch": asked}, response, at=at)


def test_kip848_epochs_keep_member_state_and_count_bumps():
    records = [
        _heartbeat848("g", "a", 0, 1, 1.0), _heartbeat848("g", "a", 1, 1, 2.0),
        _heartbeat848("g", "b", 0, 2, 3.0),                          # b joins: the group moves to epoch 2
        _heartbeat848("g", "a", 1, 2, 3.5), _heartbeat848("g", "b", 2, 2, 4.0),
        _heartbeat848("g", "b", -1, -1, 5.0),                        # b leaves
        _heartbeat848("g", "a", 2, 3, 6.0),
    ]
    [found] = _run(records)
    assert found["group_type"] == "consumer"
    assert found["rebalances"] == 2 and found["severity"] == INFO
    assert found["pause_ms"] == 500.0  # epoch 2 at 3.0 s, a reached it at 3.5 s; epoch 3 reached at once
    assert {r["reason"] for r in found["reasons"]} == {"member b joined", "member b left (heartbeat with epoch -1)"}


def test_kip848_fenced_member_is_a_warning():
    records = [_heartbeat848("g", "a", 0, 1, 1.0), _heartbeat848("g", "a", 1, -1, 30.0, error=110)]
    [found] = _run(records)
    assert found["severity"] == WARNING and found["timed_out"] == 1


def test_brokers_own_clients_are_not_members():
    record = join("g", "a", 1, 1.0, ["a"])
    record["client_id"] = "broker-1-txn-marker-sender"
    check = Rebalance()
    check.exchange(record)
    assert len(check.groups) == 0


def test_groups_are_bounded_with_a_notice():
    from kinspect.doctor.options import Thresholds

    check = Rebalance(Thresholds(max_state=3))
    for i in range(10):
        check.exchange(join(f"g{i}", "a", 1, float(i), ["a"]))
    assert len(check.groups) == 3
    notice = check.groups.notice("rebalance")
    assert notice["dropped"] == 7 and "--max-state" in notice["what"]


def test_share_groups_follow_their_heartbeat_epochs_too():
    def beat(member, asked, epoch, at):
        return exchange(76, {"group_id": "s", "member_id": member, "member_epoch": asked},
                        {"error_code": 0, "member_id": member, "member_epoch": epoch, "heartbeat_interval_ms": 1000},
                        at=at)

    [found] = _run([beat("a", 0, 1, 1.0), beat("b", 0, 2, 2.0), beat("a", 1, 2, 2.4), beat("b", 2, 2, 3.0)])
    assert (found["group_type"], found["rebalances"], found["members"]) == ("share", 1, 2)
    assert found["pause_ms"] == 400.0
