"""kipcheck-share against the reference broker: the stream reader driven as Spark drives it, then under Spark.

The reader tests call the source's methods in the order Spark does (notes/SPARK-PYTHON-DATASOURCE.md
§2.3), which makes each failure case of spec/spark-connectors.md a short deterministic test; the
Spark tests run real queries on the shared local session.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from spark_support import assert_traces_pass, fresh_topic

from kipcheck.impl.spark import share
from kipcheck.impl.spark.staging import StagedBatchMissing

JOIN_TIMEOUT_S = 60


def settings(broker, topic, group, tmp_path, **extra):
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, "kafka.group.id": group,
               "stagingLocation": str(tmp_path / "staging"), "traceLocation": str(tmp_path / "traces"),
               "maxOffsetsPerTrigger": "20", **{key: str(value) for key, value in extra.items()}}
    return share.settings_of(options, streaming=True)


def next_batch(reader, start: int) -> int:
    """latestOffset as Spark's triggers call it, until the group hands out a batch (joining takes a few polls)."""
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while time.monotonic() < deadline:
        end = reader.latestOffset({"batch": start})["batch"]
        if end != start:
            return end
    raise AssertionError(f"no micro-batch after {start} within {JOIN_TIMEOUT_S} s")


def rows_of(reader, start: int, end: int) -> pa.Table:
    """What Spark's tasks read for batches [start, end)."""
    parts = reader.partitions({"batch": start}, {"batch": end})
    return pa.Table.from_batches([batch for part in parts for batch in reader.read(part)], reader.schema)


def test_staged_batch_replays_the_same_rows(spark_broker, tmp_path):
    topic = fresh_topic(spark_broker, partitions=2, records=30)
    reader = share.ShareStreamReader(settings(spark_broker, topic, "replay", tmp_path, minPartitions=3))
    try:
        end = next_batch(reader, 0)
        assert len(reader.partitions({"batch": 0}, {"batch": end})) == 3
        first = rows_of(reader, 0, end)
        assert first.num_rows > 0
        assert rows_of(reader, 0, end).equals(first), "a retried task reads other rows"
        assert set(first.column("deliveryCount").to_pylist()) == {1}
    finally:
        reader.stop()
    assert_traces_pass(tmp_path / "traces")


def test_records_are_accepted_only_once_spark_committed_their_batch(spark_broker, tmp_path):
    topic = fresh_topic(spark_broker, records=50)
    group_settings = settings(spark_broker, topic, "after-commit", tmp_path)
    reader = share.ShareStreamReader(group_settings)
    try:
        end = next_batch(reader, 0)
        reader.partitions({"batch": 0}, {"batch": end})  # planned, running, not committed
        steps = (tmp_path / "traces").glob("*.jsonl")
        assert not any('"acknowledge"' in path.read_text() for path in steps)
        next_batch(reader, end)  # Spark asks for the next batch only after committing batch 0
        [path] = (tmp_path / "traces").glob("*.jsonl")
        acknowledged = [line for line in path.read_text().splitlines() if '"acknowledge"' in line]
        assert len(acknowledged) == 1 and '"error":"NONE"' in acknowledged[0]
    finally:
        reader.stop()
    assert_traces_pass(tmp_path / "traces")


def test_stopped_query_redelivers_only_its_last_batch(spark_broker, tmp_path):
    topic = fresh_topic(spark_broker, records=60)
    group_settings = settings(spark_broker, topic, "stopped", tmp_path)
    reader = share.ShareStreamReader(group_settings)
    end_0 = next_batch(reader, 0)
    first = rows_of(reader, 0, end_0)
    end_1 = next_batch(reader, end_0)  # accepts batch 0
    last = rows_of(reader, end_0, end_1)
    reader.stop()  # batch 1 committed by Spark, but nothing told the source: released on close

    restarted = share.ShareStreamReader(group_settings)
    try:
        reader.commit({"batch": end_1})  # a stopped reader's late commit does nothing
        restarted.commit({"batch": end_1})  # Spark's repeated commit on restart: nothing pending
        end_2 = next_batch(restarted, end_1)
        again = rows_of(restarted, end_1, end_2)
    finally:
        restarted.stop()
    offsets = again.column("offset").to_pylist()
    assert set(last.column("offset").to_pylist()) <= set(offsets)
    assert not set(first.column("offset").to_pylist()) & set(offsets), "an accepted record came back"
    redelivered = {row["offset"]: row["deliveryCount"] for row in again.to_pylist()}
    assert all(redelivered[offset] == 2 for offset in last.column("offset").to_pylist())
    assert_traces_pass(tmp_path / "traces")


def test_missing_staged_batch_is_data_loss(spark_broker, tmp_path):
    topic = fresh_topic(spark_broker, records=10)
    group_settings = settings(spark_broker, topic, "lost-staging", tmp_path)
    reader = share.ShareStreamReader(group_settings)
    try:
        end = next_batch(reader, 0)
        reader.staging.path(0).unlink()
        with pytest.raises(StagedBatchMissing, match="micro-batch 0 is not in the staging location"):
            reader.partitions({"batch": 0}, {"batch": end})
        lenient = share.ShareStreamReader({**group_settings, "failOnDataLoss": False})
        assert lenient.partitions({"batch": 0}, {"batch": end}) == []
    finally:
        reader.stop()


def read_stream(spark, broker, topic, group, tmp_path, name="q"):
    """An availableNow query of the topic through the group, into a list of (batch id, rows)."""
    batches = []
    query = (spark.readStream.format("kipcheck-share").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic).option("kafka.group.id", group).option("maxOffsetsPerTrigger", 40)
             .option("stagingLocation", str(tmp_path / name / "staging"))
             .option("traceLocation", str(tmp_path / "traces")).option("kafkaConsumer.pollTimeoutMs", 4000).load()
             .writeStream.foreachBatch(lambda frame, batch_id: batches.append((batch_id, frame.collect())))
             .option("checkpointLocation", str(tmp_path / name / "checkpoint")).trigger(availableNow=True).start())
    assert query.awaitTermination(240), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return batches


def test_stream_under_spark_reads_every_record_once(spark, spark_broker, tmp_path):
    topic = fresh_topic(spark_broker, partitions=2, records=150)
    batches = read_stream(spark, spark_broker, topic, "stream", tmp_path)
    offsets = sorted((row.partition, row.offset) for _, rows in batches for row in rows)
    assert len(offsets) == 150 and len(set(offsets)) == 150
    assert len(batches) >= 4, "maxOffsetsPerTrigger=40 makes several micro-batches"
    # availableNow's last latestOffset accepted the last batch: a second run finds nothing.
    again = read_stream(spark, spark_broker, topic, "stream", tmp_path, name="again")
    assert [row for _, rows in again for row in rows] == []
    assert_traces_pass(tmp_path / "traces", at_least=2)


def test_batch_read_under_spark_takes_what_the_group_has(spark, spark_broker):
    topic = fresh_topic(spark_broker, partitions=2, records=80)
    reader = (spark.read.format("kipcheck-share").option("kafka.bootstrap.servers", spark_broker.bootstrap)
              .option("subscribe", topic).option("kafka.group.id", "batch").option("minPartitions", 2)
              .option("kafkaConsumer.pollTimeoutMs", 15000))
    rows = reader.load().collect()
    assert sorted((row.partition, row.offset) for row in rows) == sorted(
        (index % 2, index // 2) for index in range(80))
    assert reader.option("kafkaConsumer.pollTimeoutMs", 3000).load().count() == 0, "accepted records came back"


def test_bad_option_fails_the_query_with_its_message(spark, spark_broker):
    frame = (spark.readStream.format("kipcheck-share").option("kafka.bootstrap.servers", spark_broker.bootstrap)
             .option("subscribe", "x").option("kafka.group.id", "g").load())
    query = frame.writeStream.format("noop").start()
    with pytest.raises(Exception, match="needs option stagingLocation"):
        query.awaitTermination(120)
    with pytest.raises(Exception, match="has no option 'subscribe_pattern'"):
        spark.read.format("kipcheck-share").option("subscribe_pattern", "x").load()
