"""IC-16 at the consumer: a member never commits a record of a key range it gave up, and says so in its trace.

The reference broker runs in this process on a disk that fails where the test says: while the individual-commit
log cannot be written, the coordinator answers NOT_COORDINATOR (IC-13), which the consumer retries and then
keeps pending (IC-18). A key range given up meanwhile takes its records out of what is pending: the next
flush sends only the records the consumer still owns and traces a `drop` of the others, which the judge
allows. A commit the application asks for after the give-up (a processing thread that outlived it) is dropped
the same way; a later delivery of the record, once the range is owned again, makes it committable again.
"""

from __future__ import annotations

import json
from pathlib import Path

from kipcheck.impl.consumer import Consumer, TopicPartition
from kipcheck.impl.consumer.individual import KeySharingTraces
from kipcheck.impl.ic.logs import IC_LOG_NAME
from kipcheck.model.key_hash import in_ranges, record_hash
from kipcheck.model.key_range_assign import split
from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.scenarios.ic import TOPIC, key_range_consumer, prepare

TP = TopicPartition(TOPIC, 0)
RECORDS = 40
LOWER, UPPER = split(2)


def in_upper_half(offset: int) -> bool:
    return in_ranges(record_hash(f"user-{offset % 37}".encode(), offset), [UPPER])   # prepare's keys


def drain(consumer: Consumer, count: int) -> list[int]:
    offsets: list[int] = []
    for _ in range(100):
        offsets += [record.offset for record in consumer.poll(200)]
        if len(offsets) >= count:
            break
    return offsets


def committed_offsets(bootstrap: str) -> set[int]:
    """Every offset the group has committed: below the committed offset, and the held ranges (IC-9)."""
    reader = key_range_consumer(bootstrap)
    try:
        next_offset = reader._offsets.committed([TP])[TP]
        held = reader._offsets.committed_ranges[TP]
    finally:
        reader.close()
    return set(range(max(next_offset, 0))) | {offset for first, last in held for offset in range(first, last + 1)}


def judged_steps(directory: Path) -> list[dict]:
    """The consumers' ic trace, judged (it must pass), as its steps."""
    [path] = directory.glob("ic-client.*.jsonl")
    verdict = check_file(path)
    assert verdict, verdict.summary()
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def dropped(steps: list[dict]) -> set[int]:
    return {offset for step in steps if step["op"] == "drop"
            for first, last in step["args"]["ranges"] for offset in range(first, last + 1)}


def test_a_commit_pending_across_the_give_up_of_its_key_range_is_dropped(tmp_path, faulty_disk, in_process_broker):
    broker = in_process_broker(faulty_disk)
    prepare(broker, RECORDS)
    traces = KeySharingTraces(tmp_path / "client-traces")
    consumer = key_range_consumer(broker.bootstrap, traces, **{"default.api.timeout.ms": 300,
                                                               "max.poll.records": RECORDS})
    try:
        consumer.assign({TP: []})
        delivered = drain(consumer, RECORDS)
        assert sorted(delivered) == list(range(RECORDS))
        faulty_disk.fail("write", path=IC_LOG_NAME, times=None)   # every commit: NOT_COORDINATOR (IC-13)
        consumer.commit_ranges({TP: [(0, RECORDS - 1)]}, asynchronous=True)
        consumer.assign({TP: [LOWER]})   # its flush fails, so the ranges wait again; the upper half is given up
        assert faulty_disk.fired
        faulty_disk.heal()
        consumer.poll(200)               # the flush: only what the consumer still owns is committed
    finally:
        consumer.close()
        traces.close()
    upper = {offset for offset in delivered if in_upper_half(offset)}
    assert 0 < len(upper) < RECORDS
    assert committed_offsets(broker.bootstrap) == set(delivered) - upper   # nothing given up, nothing owned lost
    assert dropped(judged_steps(tmp_path / "client-traces")) == upper


def test_a_commit_asked_for_after_the_give_up_is_dropped_until_the_record_comes_back(tmp_path, faulty_disk,
                                                                                     in_process_broker):
    broker = in_process_broker(faulty_disk)
    prepare(broker, RECORDS)
    traces = KeySharingTraces(tmp_path / "client-traces")
    consumer = key_range_consumer(broker.bootstrap, traces, **{"max.poll.records": RECORDS})
    try:
        consumer.assign({TP: []})
        delivered = drain(consumer, RECORDS)
        consumer.assign({TP: [LOWER]})   # nothing committed yet: the upper half's records are given up
        assert consumer.commit_ranges({TP: [(0, RECORDS - 1)]}) == {TP: "NONE"}   # a late commit, as a zombie's
        upper = {offset for offset in delivered if in_upper_half(offset)}
        assert committed_offsets(broker.bootstrap) == set(delivered) - upper
        assert consumer.commit_ranges({TP: [(offset, offset) for offset in sorted(upper)]}) == {}   # all dropped
        consumer.assign({TP: []})        # the whole partition again: the upper half is delivered again
        assert sorted(drain(consumer, len(upper))) == sorted(upper)
        assert consumer.commit_ranges({TP: [(0, RECORDS - 1)]}) == {TP: "NONE"}
    finally:
        consumer.close()
        traces.close()
    assert committed_offsets(broker.bootstrap) == set(range(RECORDS))
    assert dropped(judged_steps(tmp_path / "client-traces")) == upper
