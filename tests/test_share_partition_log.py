"""Kafka 4.2's log under a share-partition: transactions, the log start offset, compaction (SP-60..SP-65).

The model and the fast acceptor are both driven; each answer is stated from Kafka 4.2's behaviour
(SharePartition.java: maybeFilterAbortedTransactionalAcquiredRecords, updateCacheAndOffsets,
maybeArchiveStaleBatches, acquireNewBatchRecords)."""

import json

import pytest

from kipcheck.model import share_partition as model
from kipcheck.model.violation import Violation
from kipcheck.oracle.check import check_lines
from kipcheck.oracle.judges.fast import share_partition as fastcheck

CLASSES = (model.SharePartition, fastcheck.SharePartition)


def lines(profile, steps, config=None):
    header = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": profile}
    if config:
        header["config"] = config
    return [json.dumps(header)] + [json.dumps({"step": number, "at_ms": 0, "actor": "a", **step})
                                   for number, step in enumerate(steps, 1)]


@pytest.mark.parametrize("step", [
    {"op": "append", "args": {"count": 1, "producer": "p1"}},
    {"op": "end_transaction", "args": {"producer": "p1", "result": "commit"}},
    {"op": "log_start", "args": {"offset": 0}},
    {"op": "compact", "args": {"first": 0, "last": 0}},
    {"op": "acquire", "args": {"max_records": 1}, "observed": {"records": [], "archived": []}},
])
def test_sp60_kip_has_no_transactions_log_start_or_compaction(step):
    verdict = check_lines(lines("kip", [{"op": "append", "args": {"count": 1}}, step]))
    assert verdict.status == "malformed" and "SP-60" in verdict.reason and verdict.line == 3


def test_sp60_read_committed_is_kafka_only():
    verdict = check_lines(lines("kip", [], {"isolation_level": "read_committed"}))
    assert verdict.status == "malformed" and "SP-60" in verdict.reason


@pytest.mark.parametrize("cls", CLASSES)
def test_sp61_a_marker_is_one_record_and_needs_an_open_transaction(cls):
    partition = cls(profile="kafka-4.2")
    partition.append(3, "p1")
    partition.end_transaction("p1", "commit")
    assert partition.log_end_offset == 4
    with pytest.raises(ValueError, match="no open transaction"):
        partition.end_transaction("p1", "abort")
    with pytest.raises(ValueError, match="result must be"):
        cls(profile="kafka-4.2").log.end_transaction("p1", "rollback")


def test_sp61_a_second_end_transaction_is_malformed():
    steps = [{"op": "append", "args": {"count": 1, "producer": "p1"}},
             {"op": "end_transaction", "args": {"producer": "p1", "result": "abort"}},
             {"op": "end_transaction", "args": {"producer": "p1", "result": "abort"}}]
    verdict = check_lines(lines("kafka-4.2", steps))
    assert verdict.status == "malformed" and verdict.line == 4 and "no open transaction" in verdict.reason


@pytest.mark.parametrize("cls", CLASSES)
def test_sp62_read_committed_stops_at_the_earliest_open_transaction(cls):
    partition = cls(profile="kafka-4.2", isolation_level="read_committed")
    partition.append(2)
    partition.append(3, "p1")  # 2-4 open
    partition.append(2, "p2")  # 5-6 open
    assert partition.log.last_stable_offset(partition.log_end_offset) == 2
    assert partition.lowest_acquisition(10) == [[0, 1, 1]]
    with pytest.raises(Violation) as raised:
        partition.acquire(0, "c1", 10, [[0, 4, 1]])
    assert raised.value.clause == "SP-62"
    partition.end_transaction("p1", "commit")  # marker at 7; p2 still open from 5
    assert partition.acquirable_new_records() == (0, 4)


@pytest.mark.parametrize("cls", CLASSES)
def test_sp62_read_uncommitted_reads_open_and_aborted_transactions(cls):
    partition = cls(profile="kafka-4.2")
    partition.append(3, "p1")
    partition.end_transaction("p1", "abort")
    partition.append(2, "p2")
    partition.acquire(0, "c1", 10, [[0, 5, 1]])
    assert partition.snapshot() == [[0, 5, "acquired", 1]]


@pytest.mark.parametrize("cls", CLASSES)
def test_sp63_aborted_records_are_archived_with_count_one_observed_or_not(cls):
    for archived in ([[0, 2]], None):
        partition = cls(profile="kafka-4.2", isolation_level="read_committed")
        partition.append(3, "p1")
        partition.end_transaction("p1", "abort")  # marker at 3
        partition.append(2)
        partition.acquire(0, "c1", 10, [[3, 5, 1]], archived=archived)
        # SP-66: an acquisition into an empty cache puts SPSO at its first offset, the aborted 0; archiving
        # them moves it no further (SharePartitionTest testAcquireWithReadCommittedIsolationLevel).
        assert (partition.spso, partition.speo) == (0, 6)
        assert partition.deciding_clause(0) == "SP-63" and partition.deciding_clause(3) == "SP-4"
        partition.acknowledge(1, "c1", [(3, 3, "gap"), (4, 5, "accept")])  # the next write moves SPSO
        assert (partition.spso, partition.speo) == (6, 6)
    partition = cls(profile="kafka-4.2", isolation_level="read_committed")
    partition.append(1)
    partition.acquire(0, "c1", 1, [[0, 0, 1]])
    partition.append(2, "p1")
    partition.end_transaction("p1", "abort")
    partition.acquire(0, "c2", 1, [], archived=[[1, 2]])  # Kafka rounds up to the aborted batch and archives it all
    assert partition.snapshot() == [[0, 0, "acquired", 1], [1, 2, "archived", 1]]
    assert partition.deciding_clause(1) == "SP-63"
    with pytest.raises(Violation) as raised:
        partition.acquire(0, "c2", 1, [], archived=[[3, 3]])  # the marker is acquired, never archived
    assert raised.value.clause == "SP-63"


@pytest.mark.parametrize("cls", CLASSES)
def test_sp63_adjacent_aborted_batches_may_be_archived_as_one_run(cls):
    """Two batches of one aborted transaction, archived by one acquisition, observed as the run [0, 2]."""
    def partition_of_two_aborted_batches():
        partition = cls(profile="kafka-4.2", isolation_level="read_committed")
        partition.append(2, "p1")
        partition.append(1, "p1")
        partition.append(3)
        partition.append(2, "p2")   # p2 stays open: the last stable offset is 6
        partition.end_transaction("p1", "abort")
        return partition

    partition = partition_of_two_aborted_batches()
    partition.acquire(0, "c1", 3, [], archived=[[0, 2]])
    assert partition.snapshot() == [[0, 2, "archived", 1]]
    with pytest.raises(Violation) as raised:   # a run reaching a record of no aborted transaction
        partition_of_two_aborted_batches().acquire(0, "c1", 3, [], archived=[[0, 3]])
    assert raised.value.clause == "SP-63"


@pytest.mark.parametrize("cls", CLASSES)
def test_sp64_log_start_moves_spso_past_available_and_acquired_records(cls):
    partition = cls(profile="kafka-4.2", record_lock_duration_ms=1000)
    partition.append(10)
    partition.acquire(0, "c1", 10, [[0, 9, 1]])
    partition.acknowledge(1, "c1", [(0, 4, "release")])
    partition.move_log_start(2, 7)
    assert (partition.spso, partition.speo) == (7, 10)
    # SP-18: the acquired records 5-6 below the new SPSO are skipped by an acknowledgement; SP-66: while
    # they are acquired, SPSO does not move (SharePartitionTest testLsoMovementWithPendingAcknowledgements).
    assert partition.acknowledge(3, "c1", [(5, 9, "accept")]) == model.ACCEPTED
    assert (partition.spso, partition.speo, partition.snapshot()) == (7, 10, [[7, 9, "acknowledged", 1]])
    partition.move_log_start(4, 3)  # at or below SPSO: Kafka ignores it
    assert partition.spso == 7
    partition.advance(1000)  # 5-6 expire below SPSO: archived, and the write moves SPSO
    assert (partition.spso, partition.speo) == (10, 10)
    partition.move_log_start(1001, 10)
    assert (partition.spso, partition.speo) == (10, 10)
    with pytest.raises(ValueError, match="log end"):
        partition.move_log_start(1002, 11)


@pytest.mark.parametrize("cls", CLASSES)
def test_sp66_spso_stays_at_the_log_start_until_the_next_write(cls):
    """SP-66: the log start moving past a terminal record leaves SPSO on it; a session's end releasing
    records below SPSO archives them and moves SPSO (SharePartitionTest testLsoMovementWithPerOffsetRenewal)."""
    partition = cls(profile="kafka-4.2", record_lock_duration_ms=1000, delivery_count_limit=2)
    partition.append(5)
    partition.acquire(0, "c1", 5, [[0, 4, 1]])
    partition.acknowledge(1, "c1", [(0, 0, "renew"), (1, 1, "accept"), (2, 2, "renew"), (3, 3, "accept"),
                                    (4, 4, "renew")], True)
    partition.move_log_start(2, 3)
    assert (partition.spso, partition.snapshot()) == (3, [[3, 3, "acknowledged", 1], [4, 4, "acquired", 1]])
    partition.leave(3, "c1")
    assert (partition.spso, partition.snapshot()) == (4, [[4, 4, "available", 1]])


@pytest.mark.parametrize("cls", CLASSES)
def test_sp66_spso_goes_back_when_records_acquired_below_it_expire(cls):
    """SP-66: with the log start past SPEO and records still acquired below it, their expiry clears Kafka's
    cache and puts SPSO at the offset after them, below the log start; the next fetch learns the log start
    again and acquires nothing."""
    partition = cls(profile="kafka-4.2", record_lock_duration_ms=1000)
    partition.append(5)
    partition.append(10)
    partition.acquire(0, "c1", 5, [[0, 4, 1]])
    partition.move_log_start(1, 8)
    assert (partition.spso, partition.speo) == (8, 8)
    # Kafka finds the batch in its cache below SPSO, so it is past the end, not an unknown batch (SP-40).
    assert partition.acknowledge(2, "c1", [(3, 9, "accept")]) == ("INVALID_REQUEST", "SP-14")
    partition.advance(1000)
    assert (partition.spso, partition.speo) == (5, 5)
    assert partition.acquirable_new_records()[0] > partition.acquirable_new_records()[1]
    partition.acquire(1001, "c2", 10, [])  # answered OFFSET_OUT_OF_RANGE inside: nothing, the log start learnt
    assert (partition.spso, partition.speo) == (8, 8)
    partition.acquire(1002, "c2", 10, [[8, 14, 1]])


@pytest.mark.parametrize("cls", CLASSES)
def test_sp64_log_start_past_speo_empties_the_window(cls):
    partition = cls(profile="kafka-4.2")
    partition.append(5)
    partition.append(5)
    partition.acquire(0, "c1", 2, [[0, 4, 1]])
    partition.move_log_start(1, 8)
    assert (partition.spso, partition.speo, partition.snapshot()) == (8, 8, [])
    assert partition.lowest_acquisition(1) == [[8, 9, 1]]  # the rest of the batch holding the log start
    assert partition.deciding_clause(3) == "SP-64"


@pytest.mark.parametrize("cls", CLASSES)
def test_sp65_compaction_archives_available_records_and_new_records_skip_removed_batches(cls):
    partition = cls(profile="kafka-4.2")
    for _ in range(4):
        partition.append(5)
    partition.acquire(0, "c1", 10, [[0, 9, 1]])
    partition.acknowledge(1, "c1", [(0, 4, "release")])
    assert partition.acquirable_new_records() == (10, 19)  # fetched from 0, new records start at SPEO
    partition.compact(2, 0, 4)  # available: archived; SP-66: SPSO passes them at the next write
    partition.compact(2, 5, 9)  # acquired: untouched
    partition.compact(2, 10, 14)  # never acquired: skipped by the next acquisition
    assert (partition.spso, partition.snapshot()) == (0, [[0, 4, "archived", 1], [5, 9, "acquired", 1]])
    assert partition.acquirable_new_records() == (15, 19)
    partition.acquire(3, "c2", 5, [[15, 19, 1]])
    assert partition.snapshot() == [[0, 4, "archived", 1], [5, 9, "acquired", 1], [10, 14, "archived", 0],
                                    [15, 19, "acquired", 1]]
    assert partition.deciding_clause(10) == "SP-65"
    # SP-65: the offsets compaction removed are not in Kafka's cache: a batch ending there is past what it has.
    assert partition.acknowledge(4, "c1", [(5, 12, "accept")]) == ("INVALID_REQUEST", "SP-14")
    assert partition.acknowledge(4, "c1", [(5, 9, "accept")]) == model.ACCEPTED
    assert (partition.spso, partition.snapshot()) == (15, [[15, 19, "acquired", 1]])
    with pytest.raises(ValueError, match="range of the log"):
        partition.compact(4, 18, 25)
