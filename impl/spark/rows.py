"""The rows the connectors produce: Spark's Kafka source schema, as Arrow record batches.

Columns as Spark's Kafka source has them (key, value, topic, partition,
offset, timestamp, timestampType, and headers with includeHeaders), plus
kipcheck-share's deliveryCount. The Arrow schema is exactly the one Spark
derives from the DDL (nullable fields, int32 for int, timestamp[us, UTC]):
Spark refuses a batch whose schema differs.
"""

from __future__ import annotations

from typing import Iterable

import pyarrow as pa

KAFKA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
             "timestamp timestamp, timestampType int")
DELIVERY_COUNT_DDL = "deliveryCount int"
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"
_HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
_KAFKA_FIELDS = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
                 ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())]
# confluent-kafka's timestamp types (0 not available, 1 create time, 2 log append time) as Spark's
# Kafka source numbers them (Kafka's TimestampType ids: -1, 0, 1).
_TIMESTAMP_TYPES = {0: -1, 1: 0, 2: 1}
CREATE_TIME = 0


def ddl(delivery_count: bool, headers: bool) -> str:
    return ", ".join([KAFKA_DDL] + [DELIVERY_COUNT_DDL] * delivery_count + [HEADERS_DDL] * headers)


def arrow_schema(delivery_count: bool, headers: bool) -> pa.Schema:
    fields = list(_KAFKA_FIELDS)
    if delivery_count:
        fields.append(("deliveryCount", pa.int32()))
    if headers:
        fields.append(("headers", pa.list_(_HEADER)))
    return pa.schema(fields)


def record_batch(messages: Iterable, schema: pa.Schema) -> pa.RecordBatch:
    """confluent-kafka Messages (from a Consumer or a ShareConsumer) as one batch of `schema`."""
    def row(message) -> tuple:
        timestamp_type, timestamp_ms = message.timestamp()
        return (message.key(), message.value(), message.topic(), message.partition(), message.offset(),
                timestamp_ms * 1000 if timestamp_type else None, _TIMESTAMP_TYPES.get(timestamp_type, -1),
                message.delivery_count() if "deliveryCount" in schema.names else None, message.headers())
    return _batch(map(row, messages), schema)


def consumer_record_batch(records: Iterable, schema: pa.Schema) -> pa.RecordBatch:
    """kipcheck.impl.consumer ConsumerRecords as one batch of `schema` (no deliveryCount).

    Their timestamps are create times (Kafka's TimestampType 0): the producers' own, as the reference
    broker stores them."""
    return _batch(((record.key, record.value, record.topic, record.partition, record.offset,
                    record.timestamp_ms * 1000, CREATE_TIME, None, record.headers) for record in records), schema)


def _batch(rows: Iterable[tuple], schema: pa.Schema) -> pa.RecordBatch:
    columns: dict[str, list] = {name: [] for name in schema.names}
    for key, value, topic, partition, offset, timestamp_us, timestamp_type, delivery_count, headers in rows:
        columns["key"].append(key)
        columns["value"].append(value)
        columns["topic"].append(topic)
        columns["partition"].append(partition)
        columns["offset"].append(offset)
        columns["timestamp"].append(timestamp_us)
        columns["timestampType"].append(timestamp_type)
        if "deliveryCount" in columns:
            columns["deliveryCount"].append(delivery_count)
        if "headers" in columns:
            columns["headers"].append([{"key": name, "value": data} for name, data in headers or ()])
    return pa.RecordBatch.from_pydict(columns, schema=schema)
