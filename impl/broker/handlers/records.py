"""Record APIs for plain clients: Produce (v3-10), Fetch (v4-12), ListOffsets (v1-7).

Produce stores each batch as raw bytes (log.PartitionLog), then tells the
share engine about the new batches and wakes waiting fetches. A write the disk
refuses answers KAFKA_STORAGE_ERROR for that partition (retriable: clients
retry) and stores nothing. acks=0 gets no
response, as in Kafka. Fetch serves plain consumers with whole stored batches
and long-polls up to `max_wait` until `min_bytes` are there; Fetch must be
advertised at v4 or more in any case: librdkafka only enables the record
format v2 feature, which ShareFetch needs, when Produce >= 3 and Fetch >= 4
are advertised. Fetch sessions (KIP-227) are not kept: every fetch is full
and answers session id 0, which clients accept.
"""

from __future__ import annotations

import logging

from kipcheck.impl.broker.broker import MAX_WAIT_MS
from kipcheck.impl.broker.clock import now_ms
from kipcheck.impl.broker.codec import reply
from kipcheck.impl.broker.log import InvalidBatch, ProducerEpochError, SequenceError
from kipcheck.impl.broker.server import NO_RESPONSE
from kipcheck.impl.storage import StorageError

LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2

log = logging.getLogger("kipcheck.broker")


def handlers(broker) -> dict:
    async def produce(connection, request):
        body = request.body
        if body.transactional_id is not None:
            error = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
            topics = [{"name": topic.name, "partition_responses": [
                _produce_result(part.index, error, -1, "transactions are not supported") for part in topic.partition_data]}
                for topic in body.topic_data]
        else:
            topics = [{"name": topic.name, "partition_responses": [
                _append(broker, topic.name, part.index, part.records) for part in topic.partition_data]}
                for topic in body.topic_data]
        if body.acks == 0:
            return NO_RESPONSE
        return reply(request, responses=topics, throttle_time=0)

    async def fetch(connection, request):
        body = request.body
        deadline_ms = now_ms() + min(body.max_wait.total_seconds() * 1000, MAX_WAIT_MS)
        while True:
            topics, total_bytes = _read(broker, body)
            remaining_ms = deadline_ms - now_ms()
            if total_bytes >= body.min_bytes or remaining_ms <= 0:
                return reply(request, throttle_time=0, error_code="NONE", session_id=0, responses=topics)
            await broker.wait_changed(int(remaining_ms))

    async def list_offsets(connection, request):
        topics = [{"name": topic.name, "partitions": [_list_offset(broker, topic.name, part)
                                                      for part in topic.partitions]}
                  for topic in request.body.topics]
        return reply(request, throttle_time=0, topics=topics)

    return {0: (3, 10, produce), 1: (4, 12, fetch), 2: (1, 7, list_offsets)}


def _produce_result(index: int, error: str, base_offset: int, message: str | None = None, start: int = -1) -> dict:
    return {"index": index, "error_code": error, "base_offset": base_offset, "log_start_offset": start,
            "record_errors": [], "error_message": message}


def _append(broker, topic: str, partition: int, records: bytes | None) -> dict:
    partition_log = broker.find_log(topic, partition)
    if partition_log is None:
        return _produce_result(partition, "UNKNOWN_TOPIC_OR_PARTITION", -1)
    try:
        end_before = partition_log.end_offset
        base_offset = partition_log.append(records or b"")
    except InvalidBatch as error:
        return _produce_result(partition, "CORRUPT_MESSAGE", -1, str(error))
    except SequenceError as error:
        return _produce_result(partition, "OUT_OF_ORDER_SEQUENCE_NUMBER", -1, str(error))
    except ProducerEpochError as error:
        return _produce_result(partition, "INVALID_PRODUCER_EPOCH", -1, str(error))
    except StorageError as error:
        log.warning("produce to %s-%d not stored: %s", topic, partition, error)
        return _produce_result(partition, "KAFKA_STORAGE_ERROR", -1, str(error))
    if partition_log.end_offset > end_before:
        broker.engine.on_produced(topic, partition, partition_log.batch_ranges(end_before))
        broker.notify_changed()
    return _produce_result(partition, "NONE", base_offset, start=partition_log.start_offset)


def _read(broker, body) -> tuple[list[dict], int]:
    budget = body.max_bytes
    topics, total = [], 0
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            partition_log = broker.find_log(topic.topic, part.partition)
            if partition_log is None:
                partitions.append(_fetch_result(part.partition, "UNKNOWN_TOPIC_OR_PARTITION", -1))
                continue
            end = partition_log.end_offset
            if not partition_log.start_offset <= part.fetch_offset <= end:
                partitions.append(_fetch_result(part.partition, "OFFSET_OUT_OF_RANGE", end, partition_log.start_offset))
                continue
            data = b""
            if part.fetch_offset < end and budget > 0:
                data = partition_log.read(part.fetch_offset, min(part.partition_max_bytes, budget))
                budget -= len(data)
                total += len(data)
            partitions.append(_fetch_result(part.partition, "NONE", end, partition_log.start_offset, data))
        topics.append({"topic": topic.topic, "partitions": partitions})
    return topics, total


def _fetch_result(index: int, error: str, high_watermark: int, start: int = -1, records: bytes = b"") -> dict:
    return {"partition_index": index, "error_code": error, "high_watermark": high_watermark,
            "last_stable_offset": high_watermark, "log_start_offset": start, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": records}


def _list_offset(broker, topic: str, part) -> dict:
    partition_log = broker.find_log(topic, part.partition_index)
    if partition_log is None:
        return {"partition_index": part.partition_index, "error_code": "UNKNOWN_TOPIC_OR_PARTITION"}
    if part.timestamp == LATEST_TIMESTAMP:
        offset = partition_log.end_offset
    elif part.timestamp == EARLIEST_TIMESTAMP:
        offset = partition_log.start_offset
    else:
        offset = partition_log.offset_for_timestamp(part.timestamp)
    return {"partition_index": part.partition_index, "error_code": "NONE", "timestamp": -1, "offset": offset,
            "leader_epoch": 0}
