"""kipcheck-keyrange against the reference broker, under the shared local Spark."""

from __future__ import annotations

import pytest
from pyspark.sql.functions import spark_partition_id
from spark_support import RANGE_FETCH, assert_traces_pass, fresh_topic, produce_records, serves_offset_commit

from kipcheck.impl.spark import keyrange as connector
from kipcheck.impl.spark.commit import RangeCommitter
from kipcheck.model.key_hash import in_ranges, record_hash
from kipcheck.model.key_range_assign import split
from kipcheck.oracle.check import check_file


def key_range_of(key, offset, ranges):
    """The index of the one range of split(ranges) holding the record's hash (model/key_hash.py)."""
    [index] = [index for index, bounds in enumerate(split(ranges)) if in_ranges(record_hash(key, offset), [bounds])]
    return index


def keyrange(spark, broker, topic, **options):
    reader = (spark.read.format("kipcheck-keyrange").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader


@pytest.mark.parametrize("fetch", ["broker", "client"])
def test_batch_read_splits_each_partition_into_key_ranges(spark, spark_broker, fetch):
    topic = fresh_topic(spark_broker, partitions=2, records=120, configs=RANGE_FETCH)
    frame = keyrange(spark, spark_broker, topic, keyRangesPerPartition=3, keyRangeFetch=fetch).load()
    assert frame.rdd.getNumPartitions() == 6, "k tasks per Kafka partition"
    rows = frame.withColumn("task", spark_partition_id()).collect()
    assert sorted((row.partition, row.offset) for row in rows) == sorted((i % 2, i // 2) for i in range(120))
    by_task: dict[int, set] = {}
    for row in rows:
        by_task.setdefault(row.task, set()).add((row.partition, key_range_of(row.key, row.offset, 3)))
    assert all(len(held) == 1 for held in by_task.values()), "a task holds one key range of one partition"
    for task in by_task.values():
        [(partition, key_range)] = task
        offsets = [row.offset for row in rows if row.partition == partition and row.key is not None
                   and key_range_of(row.key, row.offset, 3) == key_range]
        assert offsets == sorted(offsets), "a key's records keep their order within its task"


def test_broker_side_fetch_needs_the_topics_consent(spark, spark_broker):
    """KR-11: a topic without accept.range.fetch refuses key-range fetches; the error says what to do."""
    topic = fresh_topic(spark_broker, records=20)
    with pytest.raises(Exception, match="set its topic config accept.range.fetch=true, or the option keyRangeFetch"):
        keyrange(spark, spark_broker, topic, keyRangesPerPartition=2).load().collect()
    assert keyrange(spark, spark_broker, topic, keyRangesPerPartition=2, keyRangeFetch="client").load().count() == 20
    assert keyrange(spark, spark_broker, topic).load().count() == 20, "k = 1 is a plain fetch"


def test_batch_read_takes_json_offsets_and_headers(spark, spark_broker):
    topic = fresh_topic(spark_broker, partitions=2, records=40, configs=RANGE_FETCH)
    frame = keyrange(spark, spark_broker, topic, includeHeaders="true", keyRangesPerPartition=2,
                     startingOffsets=f'{{"{topic}": {{"0": 5, "1": -2}}}}',
                     endingOffsets=f'{{"{topic}": {{"0": 15, "1": -1}}}}').load()
    rows = frame.collect()
    assert sorted((row.partition, row.offset) for row in rows) == (
        [(0, offset) for offset in range(5, 15)] + [(1, offset) for offset in range(20)])
    assert "headers" in frame.columns and rows[0].headers == []
    with pytest.raises(Exception, match="must name every partition"):
        keyrange(spark, spark_broker, topic, startingOffsets=f'{{"{topic}": {{"0": 5}}}}').load().collect()


def run_stream(spark, broker, topic, tmp_path, name, group=None, trigger_max=25, source="kipcheck-keyrange",
               **options):
    batches = []
    reader = (spark.readStream.format(source).option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("keyRangesPerPartition", 2).option("maxOffsetsPerTrigger", trigger_max))
    if group:
        reader = reader.option("kafka.group.id", group).option("traceLocation", str(tmp_path / "traces"))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream
             .foreachBatch(lambda frame, batch_id: batches.append((batch_id, frame.collect())))
             .option("checkpointLocation", str(tmp_path / name)).trigger(availableNow=True).start())
    assert query.awaitTermination(240), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return [(row.partition, row.offset) for _, rows in batches for row in rows], len(batches)


def test_stream_resumes_from_its_checkpoint(spark, spark_broker, tmp_path):
    topic = fresh_topic(spark_broker, partitions=2, records=60, configs=RANGE_FETCH)
    first, batches = run_stream(spark, spark_broker, topic, tmp_path, "checkpoint", startingOffsets="earliest")
    assert sorted(first) == sorted((i % 2, i // 2) for i in range(60)) and batches >= 3
    produce_records(spark_broker, topic, 2, 60, 30)
    second, _ = run_stream(spark, spark_broker, topic, tmp_path, "checkpoint")
    assert sorted(second) == sorted((i % 2, i // 2) for i in range(60, 90)), "read again or skipped"


def test_commits_follow_spark_and_a_new_query_resumes_from_them(spark, spark_broker, tmp_path):
    if not serves_offset_commit(spark_broker):
        pytest.skip("the reference broker does not serve OffsetCommit/OffsetFetch yet (consumer groups)")
    topic = fresh_topic(spark_broker, partitions=1, records=100, configs=RANGE_FETCH)
    first, batches = run_stream(spark, spark_broker, topic, tmp_path, "one", group="committing",
                                startingOffsets="earliest")
    assert sorted(first) == [(0, offset) for offset in range(100)] and batches == 4
    # availableNow never commits its last batch (Spark calls commit(end) only when planning the next):
    # a new query from the committed offsets reads that batch again, and nothing before it.
    second, _ = run_stream(spark, spark_broker, topic, tmp_path, "two", group="committing",
                           startingOffsets="committed")
    assert sorted(second) == [(0, offset) for offset in range(75, 100)]
    [trace] = assert_traces_pass(tmp_path / "traces")
    commits = [line for line in trace.read_text().splitlines() if '"op":"commit"' in line]
    assert len(commits) >= 3 and all('"error":"NONE"' in line for line in commits)


def test_seeded_bug_commit_past_the_batch_is_caught_by_the_oracle(spark, spark_broker, tmp_path):
    """A committer that commits one offset past what the batch read: the ic trace shows the skip."""
    if not serves_offset_commit(spark_broker):
        pytest.skip("the reference broker does not serve OffsetCommit/OffsetFetch yet (consumer groups)")

    # Classes defined here travel to Spark's source process by value (cloudpickle).
    class SkippingCommitter(RangeCommitter):
        def commit(self, ranges):
            return super().commit({key: [(first, last + 1)] for key, [(first, last)] in ranges.items()})

    class SkippingReader(connector.KeyRangeStreamReader):
        def _reader(self):
            offsets = super()._reader()
            if not isinstance(self._committer, SkippingCommitter):
                self._committer.close()
                self._committer = SkippingCommitter(self.settings["kafka"], 30)
            return offsets

    class Skipping(connector.KipcheckKeyRange):
        @classmethod
        def name(cls):
            return "kipcheck-keyrange-skipping"

        def streamReader(self, schema):
            return SkippingReader(connector.settings_of(self.options, streaming=True))

    spark.dataSource.register(Skipping)
    topic = fresh_topic(spark_broker, records=60, configs=RANGE_FETCH)
    run_stream(spark, spark_broker, topic, tmp_path, "skipping", group="skipping", source=Skipping.name(),
               startingOffsets="earliest")
    [trace] = sorted((tmp_path / "traces").glob("*.jsonl"))
    verdict = check_file(trace)
    assert verdict.status == "violation" and verdict.clause.startswith("IC-"), verdict.summary()
