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
    columns: dict[str, list] = {name: [] for name in schema.names}
    for message in messages:
        timestamp_type, timestamp_ms = message.timestamp()
        columns["key"].append(message.key())
        columns["value"].append(message.value())
        columns["topic"].append(message.topic())
        columns["partition"].append(message.partition())
        columns["offset"].append(message.offset())
        columns["timestamp"].append(timestamp_ms * 1000 if timestamp_type else None)
        columns["timestampType"].append(_TIMESTAMP_TYPES.get(timestamp_type, -1))
        if "deliveryCount" in columns:
            columns["deliveryCount"].append(message.delivery_count())
        if "headers" in columns:
            columns["headers"].append([{"key": key, "value": value} for key, value in message.headers() or ()])
    return pa.RecordBatch.from_pydict(columns, schema=schema)
