"""The consumer's pending commits (impl/ic/client.py, spec IC-18) and its switch (KR-11)."""

import pytest

from kipcheck.impl.ic.client import RANGE_WIRE_BYTES, ConsumerIcConfig, PendingCommits
from kipcheck.model.key_hash import HASH_MAX


def test_ic_18_the_trigger_counts_ranges_and_caps_nothing():
    """IC-18: passing max.num.ranges.to.commit makes a commit due; every range is still kept."""
    pending = PendingCommits(ConsumerIcConfig(max_num_ranges_to_commit=3))
    for offset in (1, 3, 5):
        pending.add("orders", 0, offset, offset)
    assert not pending.due()
    pending.add("orders", 1, 9, 9)
    assert pending.due() and pending.count == 4
    pending.add("orders", 0, 2, 2)                     # fills a gap: [1, 3] and [5, 5] remain
    assert pending.count == 3 and not pending.due()
    assert pending.take() == [{("orders", 0): [(1, 3), (5, 5)], ("orders", 1): [(9, 9)]}]
    assert pending.take() == [] and pending.count == 0


def test_ic_18_a_commit_that_does_not_fit_is_split_and_loses_nothing():
    """IC-18: 200,000 ranges (3.2 MB on the wire) are split into requests under max_request_bytes."""
    config = ConsumerIcConfig()
    pending = PendingCommits(config)
    for offset in range(0, 300_000, 2):
        pending.add("orders", 0, offset, offset)
    for offset in range(0, 100_000, 2):
        pending.add("payments", 3, offset, offset)
    requests = pending.take()
    assert len(requests) == 4
    for request in requests:
        ranges = sum(len(pairs) for pairs in request.values())
        assert ranges * RANGE_WIRE_BYTES + 4096 + 128 * len(request) <= config.max_request_bytes
    sent = {(key, pair) for request in requests for key, pairs in request.items() for pair in pairs}
    assert len(sent) == 200_000
    pending.restore(requests[1])
    assert pending.count == sum(len(pairs) for pairs in requests[1].values())


def test_kr_11_consumer_refuses_key_ranges_unless_it_allows_sharing():
    """KR-11: allow.individual.commit=false refuses a key-range assignment; a whole partition is fine."""
    refusing = ConsumerIcConfig.from_properties({"allow.individual.commit": "false"})
    assert refusing.assignment_error([(0, 2**62 - 1)]) == "CONSUMER_RANGE_FETCH_NOT_ACCEPTED"
    assert refusing.assignment_error([]) == refusing.assignment_error([(0, HASH_MAX)]) == "NONE"
    assert ConsumerIcConfig().assignment_error([(5, 4)]) == "INVALID_REQUEST"
    for bad in ({"max.num.ranges.to.commit": "0"}, {"allow.individual.commit": "maybe"}, {"unknown": "1"}):
        with pytest.raises(ValueError):
            ConsumerIcConfig.from_properties(bad)
    with pytest.raises(ValueError):
        PendingCommits().add("orders", 0, 5, 4)


def test_the_consumers_view_amends_gaps_and_purges_below_the_stable_offset():
    """IC-11 with the seed's example, IC-10, and IC-21: an answered commit folds into LastStableOffset."""
    from kipcheck.impl.consumer.individual import IndividualCommits
    from kipcheck.impl.topic_partition import TopicPartition

    view, tp = IndividualCommits(), TopicPartition("orders", 0)
    view.learned(tp, 40, [(43, 45), (48, 49)])
    assert view.amend(tp, [(40, 50)]) == [(41, 42), (46, 47), (50, 50)]
    assert [offset for offset in range(39, 51) if not view.committed(tp, offset)] == [41, 42, 46, 47, 50]
    view.answered(tp, 42, [(41, 42), (46, 47)])
    assert view.stable_offset(tp) == 49 and view.amend(tp, [(45, 52)]) == [(50, 52)]
