"""The Spark connectors' parts that need no Spark: options, key ranges, the staging store, traces, offsets."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from kipcheck.impl.spark import keyrange, share
from kipcheck.impl.spark.options import OptionError
from kipcheck.impl.spark.rows import arrow_schema
from kipcheck.impl.spark.staging import StagedBatchMissing, StagingStore
from kipcheck.impl.spark.traces import IcTraces, ShareTraces
from kipcheck.model.key_hash import in_ranges, record_hash
from kipcheck.model.key_range_assign import split
from kipcheck.oracle.check import check_file

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}

@pytest.mark.parametrize("ranges", [1, 2, 3, 8])
def test_slices_take_the_assignors_key_ranges_and_cover_the_hash_space_once(ranges):
    """A partition's k slices hold split(k) (KR-8), so each record hash (KR-9) is in exactly one of them."""
    pieces = [keyrange.KeyRangeSlice("orders", 0, 0, 10, index, ranges) for index in range(ranges)]
    assert [piece.hash_range() for piece in pieces] == split(ranges)
    generator = random.Random(ranges)
    for offset in range(2000):
        key = None if offset % 7 == 0 else generator.randbytes(generator.randrange(0, 12))
        holders = [piece for piece in pieces if in_ranges(record_hash(key, offset), [piece.hash_range()])]
        assert len(holders) == 1, (key, offset)
        if key is not None:
            assert in_ranges(record_hash(key, offset + 99), [holders[0].hash_range()]), \
                "a key's range does not depend on its offset"


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "orders"}, "needs option kafka.bootstrap.servers"),
    ({**BASE, "subscribe": "a,,b"}, "comma-separated list of distinct topic names"),
    ({**BASE, "keyRangesPerPartition": "0"}, "keyRangesPerPartition must be a positive integer"),
    ({**BASE, "keyRangesPerPartition": "two"}, "keyRangesPerPartition must be a positive integer"),
    ({**BASE, "keyRangeFetch": "server"}, "keyRangeFetch must be one of broker, client"),
    ({**BASE, "failOnDataLoss": "yes"}, "failOnDataLoss must be true or false"),
    ({**BASE, "startingOffsets": "newest"}, "startingOffsets must be earliest, latest, committed or JSON"),
    ({**BASE, "startingOffsets": '{"orders": {"0": -3}}'}, "startingOffsets must be earliest"),
    ({**BASE, "startingOffsets": "committed"}, "startingOffsets=committed needs option kafka.group.id"),
    ({**BASE, "assign": '{"orders": [0]}'}, "does not take option assign: name the topics with subscribe"),
    ({**BASE, "stagingLocation": "/tmp/x"}, "does not take option staginglocation"),
    ({**BASE, "maxOfsetsPerTrigger": "5"}, "has no option 'maxofsetspertrigger'"),
    ({**BASE, "traceLocation": "/tmp/t"}, "traceLocation traces the group's commits and needs option kafka.group.id"),
    ({**BASE, "traceConfig": "[1]"}, "traceConfig must be a JSON object"),
    ({**BASE, "traceProfile": "kafka-9"}, "traceProfile must be one of kafka-4.2, kip"),
])
def test_keyrange_bad_options_are_named(options, message):
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace("[", r"\[")):
        keyrange.settings_of(options, streaming=True)


def test_keyrange_ending_offsets_only_in_batch():
    with pytest.raises(OptionError, match="endingOffsets is for batch queries"):
        keyrange.settings_of({**BASE, "endingOffsets": "latest"}, streaming=True)
    assert keyrange.settings_of({**BASE, "endingOffsets": "latest"}, streaming=False)["startingOffsets"] == "earliest"


@pytest.mark.parametrize("options, streaming, message", [
    (BASE, True, "needs option kafka.group.id"),
    ({**BASE, "kafka.group.id": "g"}, True, "needs option stagingLocation"),
    ({**BASE, "kafka.group.id": "g", "startingOffsets": "earliest"}, True, "does not take option startingoffsets"),
    ({**BASE, "kafka.group.id": "g", "acknowledgementMode": "commit"}, False, "needs a streaming query"),
    ({**BASE, "kafka.group.id": "g", "stagingLocation": "/s", "acknowledgementMode": "task"}, True,
     "a streaming query acknowledges with acknowledgementMode=commit"),
    ({**BASE, "kafka.group.id": "g", "acknowledgementMode": "later"}, False, "must be one of commit, task"),
])
def test_share_bad_options_are_named(options, streaming, message):
    with pytest.raises(OptionError, match=message):
        share.settings_of(options, streaming)


def test_options_are_case_insensitive_and_kafka_options_pass_through():
    settings = share.settings_of({**BASE, "KAFKA.GROUP.ID": "g", "stagingLocation": "/s", "MaxOffsetsPerTrigger": "7",
                                  "kafka.fetch.max.bytes": "1000"}, streaming=True)
    assert settings["maxOffsetsPerTrigger"] == 7
    assert settings["kafka"] == {"group.id": "g", "fetch.max.bytes": "1000", "bootstrap.servers": "127.0.0.1:9092"}
    assert settings["acknowledgementMode"] == "commit"


def batch_of(offsets, schema):
    return pa.RecordBatch.from_pydict({"key": [b"k"] * len(offsets), "value": [b"v%d" % o for o in offsets],
                                       "topic": ["t"] * len(offsets), "partition": [0] * len(offsets),
                                       "offset": list(offsets), "timestamp": [None] * len(offsets),
                                       "timestampType": [-1] * len(offsets), "deliveryCount": [1] * len(offsets)},
                                      schema=schema)


def test_staging_replays_the_same_rows_and_discards(tmp_path):
    schema = arrow_schema(delivery_count=True, headers=False)
    store = StagingStore(tmp_path / "staging")
    for batch in range(4):
        store.stage(batch, batch_of(range(batch * 10, batch * 10 + 10), schema))
    (tmp_path / "staging" / ".batch-9.arrow.tmp").write_bytes(b"torn")
    assert store.rows(2) == 10
    first = pa.Table.from_batches(list(store.read(2, 3, 4, schema)))
    again = pa.Table.from_batches(list(store.read(2, 3, 4, schema)))
    assert first.equals(again) and first.column("offset").to_pylist() == [23, 24, 25, 26]
    store.discard(keep_from=1, keep_below=3)
    assert store.batches() == [1, 2]
    assert not list((tmp_path / "staging").glob(".batch-*"))
    with pytest.raises(StagedBatchMissing, match="micro-batch 3 is not in the staging location"):
        store.rows(3)
    with pytest.raises(ValueError, match="a staging location belongs to one query"):
        list(store.read(1, 0, 1, arrow_schema(delivery_count=True, headers=True)))


def test_capped_shares_the_limit_by_backlog():
    start = {"a": {"0": 0, "1": 100}}
    end = {"a": {"0": 300, "1": 200}}
    assert keyrange.capped(start, end, None) == end
    assert keyrange.capped(start, end, 1000) == end
    assert keyrange.capped(start, end, 40) == {"a": {"0": 30, "1": 110}}
    assert keyrange.capped({"a": {"0": 0}}, {"a": {"0": 5}}, 1) == {"a": {"0": 1}}


def test_accepted_batches_merge_runs_of_any_delivery_count():
    assert share.accepted_batches([(0, 4, 1), (5, 6, 2), (9, 9, 1)]) == [(0, 6, "accept"), (9, 9, "accept")]


def test_share_trace_resumed_by_a_new_process_leaves_for_the_dead_one(tmp_path):
    first = ShareTraces(tmp_path, "g", "kafka-4.2", {"record_lock_duration_ms": 30000}, actor="spark-1")
    first.partition("t", 0).acquired(1000, 10, [[5, 9, 1]])
    first.partition("t", 0).acknowledged(1001, [(5, 7, "accept")], "NONE")
    first.partition("t", 0).acquired(1002, 10, [[10, 12, 1]])
    # The process dies here: no leave. Its successor resumes the trace.
    second = ShareTraces(tmp_path, "g", "kafka-4.2", {"record_lock_duration_ms": 30000}, actor="spark-2")
    second.partition("t", 0).acquired(2000, 10, [[8, 9, 2], [10, 12, 2], [13, 14, 1]])
    second.partition("t", 0).acknowledged(2001, [(8, 14, "accept")], "NONE")
    second.close(2002)
    [path] = tmp_path.glob("share-partition.*.jsonl")
    verdict = check_file(path)
    assert verdict, verdict.summary()
    assert [line.count('"leave"') for line in path.read_text().splitlines()].count(1) == 2


def test_share_trace_of_a_double_delivery_is_a_violation(tmp_path):
    traces = ShareTraces(tmp_path, "g", "kafka-4.2", {}, actor="spark-1")
    traces.partition("t", 0).acquired(1000, 10, [[0, 4, 1]])
    traces.partition("t", 0).acquired(1001, 10, [[3, 4, 1]])  # handed out again while still acquired
    traces.close(1002)
    [path] = tmp_path.glob("share-partition.*.jsonl")
    verdict = check_file(path)
    assert verdict.status == "violation" and verdict.clause.startswith("SP-"), verdict.summary()


def test_ic_trace_of_a_commit_that_skips_a_record_is_a_violation(tmp_path):
    traces = IcTraces(tmp_path, "g", actor="committer")
    traces.fetched(1, "t", 0, -1)
    traces.committed(2, "t", 0, [[0, 9]], "NONE")
    traces.fetched(3, "t", 0, 10)  # the broker says offset 10 is committed too
    traces.close()
    [path] = tmp_path.glob("ic.*.jsonl")
    verdict = check_file(path)
    assert verdict.status == "violation" and verdict.clause.startswith("IC-"), verdict.summary()


@pytest.mark.parametrize("master, here", [
    ("local[2]", True), ("local", True), ("spark://127.0.0.1:7077", True), ("spark://localhost:7077", True),
    ("spark://spark-master.example:7077", False), ("yarn", False), ("k8s://https://10.0.0.1:6443", False),
])
def test_the_driver_listens_on_loopback_only_for_executors_on_this_machine(master, here):
    from kipcheck.impl.spark.session import on_this_machine

    assert on_this_machine(master) is here
