"""impl/expansion on an in-memory topic: the partitioner is the model's function, the job record keeps N0 and the
splits, the assignor hands partitions over only to ready new processors, and the seed's job (10 partitions and
processors, then 15 partitions, 15 processors, 18 partitions) outputs exactly a single-threaded running count while
every trace it wrote passes `kipcheck check`. The same job against the reference broker and Apache Kafka, with
CreatePartitions, is the end-to-end part of KIP-287 and not here."""

from __future__ import annotations

import random

import pytest
from expansion_support import InMemoryTopic, Job, LocalGroup, running_count

from kipcheck.impl.expansion import JobRecord, JobRecordError, LinearHashPartitioner, Processor, ProcessorError, Record
from kipcheck.impl.expansion.assignor import gaining_processors, next_moves
from kipcheck.model.expansion import key_hash, linear_hash
from kipcheck.oracle.check import check_file

KEYS = [b"customer-%d" % number for number in range(2_000)]


def test_the_partitioner_is_the_model_function():
    """EX-2: one function: Kafka's positive murmur2 of the key, then linear hashing over N0."""
    chooser = random.Random(2)
    for _ in range(500):
        initial = chooser.randint(1, 12)
        partitions = chooser.randint(initial, 9 * initial)
        key = chooser.choice(KEYS)
        assert LinearHashPartitioner(initial).partition(key, partitions) == linear_hash(key_hash(key), partitions, initial)
    assert LinearHashPartitioner(3).partition("customer-7", 5) == LinearHashPartitioner(3).partition(b"customer-7", 5)


def processor_of(key: bytes, partitions: int, processors: int, partition=None) -> int:
    partition = LinearHashPartitioner(10).partition(key, partitions) if partition is None else partition(key, partitions)
    return linear_hash(partition, processors, 10)


def test_the_seed_example_moves_keys_only_onto_new_processors():
    """The seed's sequence: P 10 -> 15 and 15 -> 18 move no key; C 10 -> 15 moves keys only to 10..14, from 0..4.
    A modulo partitioner (librdkafka's) moves half of them at P 10 -> 15."""
    before = {key: processor_of(key, 10, 10) for key in KEYS}
    assert {key: processor_of(key, 15, 10) for key in KEYS} == before
    after = {key: processor_of(key, 15, 15) for key in KEYS}
    moved = {(before[key], after[key]) for key in KEYS if after[key] != before[key]}
    assert moved and all(old in range(5) and new == old + 10 for old, new in moved)
    assert {key: processor_of(key, 18, 15) for key in KEYS} == after
    modulo = [key for key in KEYS if processor_of(key, 15, 10, lambda key, count: key_hash(key) % count) != before[key]]
    assert 0.4 < len(modulo) / len(KEYS) < 0.6


@pytest.mark.parametrize("call, error", [
    (lambda: LinearHashPartitioner(0), "initial_partitions must be an integer >= 1"),
    (lambda: LinearHashPartitioner(10).partition(None, 10), "a record without a key"),
    (lambda: LinearHashPartitioner(10).partition(b"k", 9), "partitions only grow"),
    (lambda: LinearHashPartitioner(10).partition(7, 10), "a key is bytes or str"),
])
def test_the_partitioner_refuses_bad_input_clearly(call, error):
    with pytest.raises((ValueError, TypeError), match=error):
        call()


def test_the_job_record_keeps_n0_and_the_splits_and_round_trips():
    ends = {0: 40, 1: 7, 2: 0, 3: 12, 4: 9, 5: 30, 6: 31, 7: 32}
    record = JobRecord(10).with_partitions(15, ends.get).with_processors(15).with_partitions(18, ends.get)
    assert (record.partitions, record.processors, record.initial) == (18, 15, 10)
    assert record.splits == {10: (0, 40), 11: (1, 7), 12: (2, 0), 13: (3, 12), 14: (4, 9), 15: (5, 30), 16: (6, 31),
                             17: (7, 32)}
    assert JobRecord.decode(record.encode()) == record


@pytest.mark.parametrize("data, error", [
    (b"{", "not a job record"),
    (b'{"initial": 0, "expansions": []}', "Expected `int` >= 1"),
    (b'{"initial": 10, "expansions": [{"processors": 11}]}', "breaks EX-3"),
    (b'{"initial": 10, "expansions": [{"partitions": 9}]}', "breaks EX-4"),
    (b'{"initial": 2, "expansions": [{"partitions": 3, "splits": [[2, 1, 0]]}]}', "breaks EX-5"),
    (b'{"initial": 2, "expansions": [{"partitions": 3, "processors": 3}]}', "exactly one of"),
    (b'{"initial": 2, "expansions": [], "owner": "me"}', "unknown field"),
])
def test_a_bad_job_record_is_refused_with_its_reason(data, error):
    with pytest.raises(JobRecordError, match=error):
        JobRecord.decode(data)


def test_the_assignor_hands_partitions_over_only_to_a_ready_new_processor():
    record = JobRecord(2).with_partitions(4, lambda partition: 5)
    start = next_moves(record, {}, {}, {0, 1}, set(), set())
    assert start.assign == {0: (0, 0), 1: (1, 0), 2: (0, 0), 3: (1, 0)} and not start.revoke
    grown = record.with_processors(3)
    assert gaining_processors(record, grown) == {2}
    holders, committed = {0: 0, 1: 1, 2: 0, 3: 1}, {2: 9}
    waiting = next_moves(grown, holders, committed, {0, 1, 2}, {2}, set())
    assert not waiting.assign and not waiting.revoke, "EX-10: nothing moves before the new processor is ready"
    assert next_moves(grown, holders, committed, {0, 1, 2}, {2}, {2}).revoke == {2: 0}
    del holders[2]
    assert next_moves(grown, holders, committed, {0, 1, 2}, {2}, {2}).assign == {2: (2, 9)}, "EX-11: at T1"


SEED_EXPANSIONS = [("partitions", 15), ("processors", 15), ("partitions", 18)]


def test_the_seed_job_outputs_exactly_the_reference_and_its_traces_pass(tmp_path, monkeypatch):
    waited, waits = set(), Processor._waits

    def counting(self, partition):
        if waits(self, partition):
            waited.add(partition)
            return True
        return False

    monkeypatch.setattr(Processor, "_waits", counting)
    job = Job(10, tmp_path, keys=300)
    job.run(SEED_EXPANSIONS)
    paths = job.close()
    reference = job.reference()
    assert len(reference) > 3_000
    assert job.outputs == reference, "every key's running count, in order, none lost, none doubled"
    assert set(job.emitted.values()) == {1}
    verdicts = [check_file(path) for path in paths]
    assert all(verdict.status == "ok" for verdict in verdicts), [v.summary() for v in verdicts if not v]
    assert len(paths) == 17 and sum(verdict.steps for verdict in verdicts) > 2 * len(reference)  # appends, outputs, more
    rebuilt = {processor.index: sum(1 for line in processor.trace.path.read_text().splitlines() if '"rebuild"' in line)
               for processor in job.processors}
    assert all(rebuilt[index] == 0 for index in range(10)), "EX-9: no state goes to an existing processor"
    assert sum(rebuilt[index] for index in range(10, 15)) > 0, "the new processors rebuilt their keys' state"
    assert waited & set(range(15, 18)), "EX-6: processors lagged at P 15 -> 18, so new partitions waited"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_expansions_back_to_back_while_processors_lag(tmp_path, seed):
    """Each expansion one round after the last, with processors behind the producer: partitions split while
    their sources are far from drained, new processors join while the old ones still catch up with the log."""
    job = Job(4, tmp_path, seed=seed, keys=120, max_records=4)
    job.run([("partitions", 8), ("processors", 8), ("partitions", 13), ("processors", 11)], rounds=1, produce=4)
    paths = job.close()
    assert job.outputs == job.reference() and set(job.emitted.values()) == {1}
    verdicts = [check_file(path) for path in paths]
    assert all(verdict.status == "ok" for verdict in verdicts), [v.summary() for v in verdicts if not v]


def test_a_processor_refuses_records_without_key_or_with_offset_gaps(tmp_path):
    class Gapped(InMemoryTopic):
        def read(self, partition, offset, max_records):
            return [Record(offset + 1, b"k", b"v")]

    for topic, error in ((Gapped(1), "dense offsets"), (InMemoryTopic(1), "without a key")):
        topic.records[0].append((None, b"v"))
        group = LocalGroup(JobRecord(1))
        processor = Processor(0, group, topic, running_count, lambda output: None)
        group.join(0)
        with pytest.raises(ProcessorError, match=error):
            processor.poll()


def test_the_expander_asks_again_while_the_group_coordinator_loads():
    """A coordinator loading its groups (after a restart, or under load) answers COORDINATOR_LOAD_IN_PROGRESS,
    which librdkafka's admin client does not retry: the expander asks again; another error is raised."""
    from concurrent.futures import Future

    from confluent_kafka import KafkaError, KafkaException

    from kipcheck.impl.expansion.expander import Expander

    class LoadingCoordinator:
        def __init__(self, answers):
            self.answers = list(answers)

        def describe_consumer_groups(self, group_ids):
            future = Future()
            answer = self.answers.pop(0)
            future.set_exception(answer) if isinstance(answer, Exception) else future.set_result(answer)
            return {group_ids[0]: future}

    loading = KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
    expander = Expander("127.0.0.1:1", "g", "t", store=object(), timeout_s=5)
    expander.admin = LoadingCoordinator([loading, loading, "the group"])
    assert expander._describe_group() == "the group"
    expander.admin = LoadingCoordinator([KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))])
    with pytest.raises(KafkaException):
        expander._describe_group()
