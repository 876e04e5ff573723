"""Partial views and the clients' conduct (spec SP-80 to SP-85, SS-40, SS-41, IC-22), judged from trace headers."""

import json

import pytest

from kipcheck.model.partial_view import SharePartitionView
from kipcheck.model.violation import Violation
from kipcheck.oracle.check import check_lines


def trace(header: dict, steps: list[tuple]) -> list[str]:
    lines = [json.dumps({"format": "kipcheck-trace", "version": 1, **header})]
    for number, (at_ms, actor, op, args, *observed) in enumerate(steps, 1):
        step = {"step": number, "at_ms": at_ms, "actor": actor, "op": op, "args": args}
        if observed:
            step["observed"] = observed[0]
        lines.append(json.dumps(step))
    return lines


def ack(first, last, kind="accept"):
    return {"first": first, "last": last, "type": kind}


# Three members c1, c2, c3 share a partition; c3 is not behind the proxy. What c1 and c2 saw:
UNSEEN_MEMBER_STEPS = [
    (100, "c1", "acquire", {"max_records": 5, "sent_ms": 90}, {"records": [[0, 4, 1]]}),
    # c3 took 5..9, unseen: c2 gets 10..14, which the full model thinks skips available records
    (110, "c2", "acquire", {"max_records": 5, "sent_ms": 105}, {"records": [[10, 14, 1]]}),
    # c3 released 5..9 unseen, then c1 gets them with count 2: the full model expected count 1
    (200, "c1", "acquire", {"max_records": 5, "sent_ms": 190}, {"records": [[5, 9, 2]]}),
    (210, "c1", "acknowledge", {"batches": [ack(0, 9)]}, {"error": "NONE"}),
]


def test_sp70_what_an_unseen_member_did_is_a_false_alarm_for_the_full_model_and_none_for_a_partial_view():
    """SP-80: a partial view is judged by the clauses that hold whatever unseen members did."""
    appends = [(0, "log", "append", {"count": 5}) for _ in range(3)]
    config = {"start_offset": 0}
    full = check_lines(trace({"machine": "share-partition", "profile": "kafka-4.2", "config": config},
                             appends + UNSEEN_MEMBER_STEPS))
    assert full.status == "violation", "the full model cannot know of c3"
    partial = check_lines(trace({"machine": "share-partition", "profile": "kafka-4.2", "config": config,
                                 "view": "partial", "conduct": True}, appends + UNSEEN_MEMBER_STEPS))
    assert partial.status == "ok", partial.summary()


def test_sp71_a_lock_is_surely_held_from_the_send_time_for_the_minimum_lock_duration():
    view = SharePartitionView(delivery_count_limit=5, min_lock_duration_ms=1000, window_max_records=100)
    view.acquire(at_ms=500, sent_ms=100, actor="c1", runs=[(0, 4, 1)])
    with pytest.raises(Violation) as caught:
        view.acquire(at_ms=1099, sent_ms=1000, actor="c2", runs=[(4, 4, 2)])
    assert caught.value.clause == "SP-81"
    view.acquire(at_ms=1100, sent_ms=1000, actor="c2", runs=[(4, 4, 2)])  # c1's lock may have expired by then


def test_sp71_a_renewal_holds_from_its_send_time_and_a_release_lets_go():
    view = SharePartitionView(delivery_count_limit=5, min_lock_duration_ms=1000, window_max_records=100)
    view.acquire(at_ms=10, sent_ms=0, actor="c1", runs=[(0, 1, 1)])
    view.acknowledge(at_ms=900, actor="c1", batches=[(0, 0, "renew")], error="NONE")
    view.acknowledge(at_ms=950, actor="c1", batches=[(1, 1, "release")], error="NONE")
    view.acquire(at_ms=960, sent_ms=955, actor="c2", runs=[(1, 1, 2)])
    with pytest.raises(Violation, match="SP-81"):
        view.acquire(at_ms=1800, sent_ms=1700, actor="c2", runs=[(0, 0, 2)])


def test_sp72_counts_may_restart_after_a_reset_or_once_no_seen_member_was_left():
    view = SharePartitionView(delivery_count_limit=5, min_lock_duration_ms=1000, window_max_records=100)
    view.acquire(at_ms=10, sent_ms=0, actor="c1", runs=[(0, 0, 3)])
    view.leave("c1")      # nobody seen is left: the group may have been emptied and its offsets reset
    view.acquire(at_ms=20, sent_ms=15, actor="c2", runs=[(0, 0, 1)])
    view.acquire(at_ms=30, sent_ms=25, actor="c3", runs=[(5, 5, 2)])
    view.reset()          # the leader restarted: counts not yet persisted are lost
    view.acquire(at_ms=40, sent_ms=35, actor="c3", runs=[(5, 5, 2)])
    view.acknowledge(at_ms=50, actor="c3", batches=[(5, 5, "release")], error="NONE")
    with pytest.raises(Violation, match="SP-82"):
        view.acquire(at_ms=60, sent_ms=55, actor="c2", runs=[(5, 5, 1)])


def test_sp73_only_requests_wholly_of_held_records_are_judged():
    view = SharePartitionView(delivery_count_limit=5, min_lock_duration_ms=1000, window_max_records=100)
    view.acquire(at_ms=10, sent_ms=0, actor="c1", runs=[(0, 4, 1)])
    view.acknowledge(at_ms=20, actor="c1", batches=[(0, 5, "accept")], error="INVALID_RECORD_STATE")  # 5: not held
    view.acknowledge(at_ms=20, actor="c1", batches=[(0, 1, "accept"), (1, 2, "accept")], error="INVALID_REQUEST")
    view.acknowledge(at_ms=20, actor="c1", batches=[(0, 4, "accept")], error="NOT_LEADER_OR_FOLLOWER")
    view.acknowledge(at_ms=1001, actor="c1", batches=[(0, 4, "accept")], error="INVALID_RECORD_STATE")  # expired
    view.acquire(at_ms=1010, sent_ms=1005, actor="c1", runs=[(0, 4, 2)])
    with pytest.raises(Violation, match="SP-83"):
        view.acknowledge(at_ms=1020, actor="c1", batches=[(0, 4, "reject")], error="INVALID_RECORD_STATE")


def test_partial_view_ops_and_fields_are_checked():
    header = {"machine": "share-partition", "view": "partial", "config": {}}
    bad = check_lines(trace(header, [(0, "c1", "acquire", {"max_records": 1, "sent_ms": 5}, {"records": []})]))
    assert bad.status == "malformed" and "sent_ms" in bad.reason
    full = check_lines(trace({"machine": "share-partition", "config": {}}, [(0, "log", "reset", {})]))
    assert full.status == "malformed"
    assert check_lines(trace({**header, "view": "half"}, [])).status == "malformed"
    assert check_lines(trace({**header, "conduct": "yes"}, [])).status == "malformed"
    assert check_lines(trace({"machine": "expansion", "view": "partial", "config": {}}, [])).status == "malformed"
    unknown = check_lines(trace(header, [(0, "c1", "acquire", {"max_records": 1, "sned_ms": 0}, {"records": []})]))
    assert unknown.status == "malformed" and "sned_ms" in unknown.reason


def test_ss41_a_partial_view_allows_the_limit_only_for_a_full_fetch():
    """SS-41: unseen sessions may fill the cache; an incremental fetch is still judged by SS-7."""
    header = {"machine": "share-session", "profile": "kafka-4.2", "view": "partial", "config": {"max_sessions": 5}}
    limit = (0, "m1", "share_fetch", {"epoch": 0, "add": ["t:0"]}, {"error": "SHARE_SESSION_LIMIT_REACHED"})
    assert check_lines(trace(header, [limit])).status == "ok"
    full_view = check_lines(trace({**header, "view": "full"}, [limit]))
    assert full_view.status == "violation" and full_view.clause == "SS-5"
    wrong = check_lines(trace(header, [(0, "m1", "share_fetch", {"epoch": 0, "add": ["t:0"]}, {"error": "NONE"}),
                                       (1, "m1", "share_fetch", {"epoch": 3}, {"error": "NONE"})]))
    assert wrong.status == "violation" and wrong.clause == "SS-7"


def test_ss40_a_member_without_a_session_in_the_trace_is_not_judged_for_its_epoch():
    header = {"machine": "share-session", "profile": "kafka-4.2", "view": "partial", "conduct": True,
              "config": {}}
    steps = [(0, "m1", "share_fetch", {"epoch": 4}, {"error": "SHARE_SESSION_NOT_FOUND"}),
             (1, "m1", "share_fetch", {"epoch": 0, "add": ["t:0"]}, {"error": "NONE"}),
             (2, "m1", "share_fetch", {"epoch": 2}, {"error": "INVALID_SHARE_SESSION_EPOCH"})]
    verdict = check_lines(trace(header, steps))
    assert verdict.status == "violation" and verdict.clause == "SS-40" and verdict.step == 3
    assert "future" in verdict.observed


def test_ic22_fetched_is_an_op_of_conduct_traces_only():
    steps = [(0, "c1", "fetched", {"ranges": [[0, 9]]}), (1, "c1", "commit", {"ranges": [[10, 10]]})]
    assert check_lines(trace({"machine": "ic", "config": {}}, steps)).status == "malformed"
    verdict = check_lines(trace({"machine": "ic", "conduct": True, "config": {}}, steps))
    assert verdict.status == "violation" and verdict.clause == "IC-22"
