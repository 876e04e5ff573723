"""Record APIs for plain clients: Produce (v3-10), Fetch (v4-12), ListOffsets (v1-7).

Produce checks each partition's batch as Kafka does (impl/wire/batches.produced_batch:
one batch of magic 2, its size, CRC, base offset, counts, no control batch;
impl/wire/records.check_records: every record, through a bounded streaming
decompressor) and answers Kafka's error for a bad one; records are read on a
worker thread (num.io.threads) when compressed or above INLINE_CHECK_BYTES. A
connection's produce requests append in the order they came (idempotent
sequences depend on it). Each batch is stored as raw bytes (log.PartitionLog),
then the share engine is told and waiting fetches are woken. Transactional
batches need a transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
for the whole request, as KafkaApis answers) and go only to partitions their
transaction added (AddPartitionsToTxn), with the producer's current epoch
(else INVALID_TXN_STATE or INVALID_PRODUCER_EPOCH, as Kafka). A read_committed Fetch reads below the last
stable offset and is told the aborted transactions it meets. A write the disk
refuses answers KAFKA_STORAGE_ERROR for that partition (retriable: clients
retry) and stores nothing. acks=0 gets no
response, as in Kafka. Fetch serves plain consumers with whole stored batches
and long-polls up to `max_wait` until `min_bytes` are there; Fetch must be
advertised at v4 or more in any case: librdkafka only enables the record
format v2 feature, which ShareFetch needs, when Produce >= 3 and Fetch >= 4
are advertised. Fetch sessions (KIP-227) are not kept: every fetch is full
and answers session id 0, which clients accept. DeleteRecords (v0-2, profile
kafka-4.2) moves a partition's log start offset, durably; reads below it are
OFFSET_OUT_OF_RANGE and share-partitions move their SPSO (spec SP-64).

A Fetch v12 partition carrying KeyRanges (impl/wire/schemas.py) gets only the
records whose key hash lies in them (KR-10: impl/ic/filtering.py, with the
broker's bounded KeyRangeCache, `max.bytes.key.range.cache`), if the topic's
`accept.range.fetch` is true, else TOPIC_RANGE_FETCH_NOT_ALLOWED (KR-11); a
batch that cannot be decoded answers CORRUPT_MESSAGE, one that would cost
more than `max.bytes.fetcher.filtering` to filter MESSAGE_TOO_LARGE, for that
partition (the filter runs on a worker thread). `min_bytes` counts the bytes
sent, after filtering.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from kipcheck.impl.broker.clock import now_ms
from kipcheck.impl.broker.limits import MAX_WAIT_MS
from kipcheck.impl.broker.log import ProducerEpochError, SequenceError, TransactionStateError
from kipcheck.impl.broker.server import NO_RESPONSE
from kipcheck.impl.ic.filtering import BatchDecodeError, FilterLimitExceeded, filter_batches
from kipcheck.impl.storage import StorageError
from kipcheck.impl.wire.batches import ATTRIBUTES_OFFSET, COMPRESSION_MASK, TRANSACTIONAL, InvalidBatch, produced_batch
from kipcheck.impl.wire.compression import Undecompressable
from kipcheck.impl.wire.records import check_records
from kipcheck.impl.wire.codec import reply
from kipcheck.impl.wire.schemas import pairs
from kipcheck.model.errors import Error
from kipcheck.model.key_hash import range_fetch_error

LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2
PRODUCE_ORDER = "produce order"  # a connection's lock: its produce requests append in the order they came
INLINE_CHECK_BYTES = 64 * 1024   # uncompressed records up to this are read on the event loop (a few ms)

log = logging.getLogger("kipcheck.broker")


def handlers(broker) -> dict:
    async def produce(connection, request):
        body = request.body
        wanted = [(topic.name, part.index, part.records) for topic in body.topic_data for part in topic.partition_data]
        if body.transactional_id is None and any(_transactional(records) for _, _, records in wanted):
            # KafkaApis: transactional batches need a transactional id, or the whole request is refused.
            results = {(topic, partition): _produce_result(partition, Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
                       for topic, partition, _ in wanted}
        else:
            async with connection.attachments.setdefault(PRODUCE_ORDER, asyncio.Lock()):  # appends in request order
                results = await _produce(broker, request.api_version, body.transactional_id, wanted)
        if body.acks == 0:
            return NO_RESPONSE
        return reply(request, throttle_time=0, responses=[
            {"name": topic.name, "partition_responses": [results[topic.name, part.index] for part in topic.partition_data]}
            for topic in body.topic_data])

    async def fetch(connection, request):
        body = request.body
        deadline_ms = now_ms() + min(body.max_wait.total_seconds() * 1000, MAX_WAIT_MS)
        while True:
            topics, total_bytes = await _read(broker, body)
            remaining_ms = deadline_ms - now_ms()
            if total_bytes >= body.min_bytes or remaining_ms <= 0:
                return reply(request, throttle_time=0, error_code=Error.NONE, session_id=0, responses=topics)
            await broker.wait_changed(int(remaining_ms))

    async def list_offsets(connection, request):
        topics = [{"name": topic.name, "partitions": [_list_offset(broker, topic.name, part)
                                                      for part in topic.partitions]}
                  for topic in request.body.topics]
        return reply(request, throttle_time=0, topics=topics)

    async def delete_records(connection, request):
        topics = [{"name": topic.name, "partitions": [_delete_records(broker, topic.name, part.partition_index, part.offset)
                                                      for part in topic.partitions]}
                  for topic in request.body.topics]
        return reply(request, throttle_time=0, topics=topics)

    table = {0: (3, 10, produce), 1: (4, 12, fetch), 2: (1, 7, list_offsets)}
    if broker.share_config.profile == "kafka-4.2":  # the kip profile has no log start movement (spec SP-60)
        table[21] = (0, 2, delete_records)
    return table


def _delete_records(broker, topic: str, partition: int, offset: int) -> dict:
    result = {"partition_index": partition, "low_watermark": -1, "error_code": Error.NONE}
    if broker.find_log(topic, partition) is None:
        return result | {"error_code": Error.UNKNOWN_TOPIC_OR_PARTITION}
    try:
        return result | {"low_watermark": broker.delete_records(topic, partition, offset)}
    except ValueError:
        return result | {"error_code": Error.OFFSET_OUT_OF_RANGE}
    except StorageError as error:
        log.warning("records of %s-%d not deleted: %s", topic, partition, error)
        return result | {"error_code": Error.KAFKA_STORAGE_ERROR}


def _produce_result(index: int, error: str, base_offset: int, message: str | None = None, start: int = -1,
                    record_errors: list[tuple[int, str]] = ()) -> dict:
    return {"index": index, "error_code": error, "base_offset": base_offset, "log_start_offset": start,
            "record_errors": [{"batch_index": record, "batch_index_error_message": text} for record, text in record_errors],
            "error_message": message}


def _transactional(records: bytes | None) -> bool:
    """Whether a partition's first batch says it is transactional (RequestUtils.hasTransactionalRecords)."""
    return bool(records) and len(records) > ATTRIBUTES_OFFSET + 1 and bool(records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL)


async def _produce(broker, version: int, transactional_id: str | None, wanted: list) -> dict:
    """{(topic, partition): result}: every batch checked as Kafka checks it (its records read off the event
    loop when they are compressed or many), then appended in request order."""
    config = broker.config
    checks = {}
    for topic, partition, records in wanted:
        if broker.find_log(topic, partition) is not None:
            checks[topic, partition] = (records, version, config.max_message_bytes, wall_clock_ms(),
                                        config.timestamp_after_max_ms, config.timestamp_before_max_ms)
    if sum(len(check[0] or b"") for check in checks.values()) <= INLINE_CHECK_BYTES and not any(
            _compressed(check[0]) for check in checks.values()):
        checked = _check_batches(checks)
    else:
        checked = await broker.off_loop(_check_batches, checks)
    # A partition named twice is appended once, with its last records, as Kafka's map of them keeps it.
    return {(topic, partition): _append(broker, topic, partition, checked.get((topic, partition)), transactional_id)
            for topic, partition in dict.fromkeys((topic, partition) for topic, partition, _ in wanted)}


def wall_clock_ms() -> int:
    """Record timestamps are wall-clock milliseconds (the broker's now_ms is monotonic)."""
    return int(time.time() * 1000)


def _compressed(records: bytes | None) -> bool:
    return bool(records) and len(records) > ATTRIBUTES_OFFSET + 1 and bool(records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK)


def _check_batches(checks: dict) -> dict:
    """{key: (batch, header) or the error it gets}: Kafka's checks of each produced batch, records included."""
    checked = {}
    for key, (records, version, max_message_bytes, at_ms, after_max_ms, before_max_ms) in checks.items():
        try:
            batch, header = produced_batch(records, version, max_message_bytes)
            check_records(batch, header, at_ms, after_max_ms, before_max_ms)
            checked[key] = (batch, header)
        except InvalidBatch as error:
            checked[key] = error
        except Undecompressable as error:
            checked[key] = InvalidBatch(f"Failed to decompress record stream: {error}", Error.UNKNOWN_SERVER_ERROR)
    return checked


def _append(broker, topic: str, partition: int, checked, transactional_id: str | None) -> dict:
    partition_log = broker.find_log(topic, partition)
    if partition_log is None:
        return _produce_result(partition, Error.UNKNOWN_TOPIC_OR_PARTITION, -1)
    if isinstance(checked, InvalidBatch):
        return _produce_result(partition, checked.error, -1, str(checked),
                               record_errors=getattr(checked, "record_errors", ()))
    batch, header = checked
    if header.transactional and transactional_id is not None:
        error = broker.transactions.in_transaction(transactional_id, header.producer_id, header.producer_epoch,
                                                   topic, partition)
        if error != Error.NONE:
            message = "Partition was not added to the transaction" if error == Error.INVALID_TXN_STATE else None
            return _produce_result(partition, error, -1, message)
    try:
        end_before = partition_log.end_offset
        base_offset = partition_log.append(batch)
    except SequenceError as error:
        return _produce_result(partition, Error.OUT_OF_ORDER_SEQUENCE_NUMBER, -1, str(error))
    except ProducerEpochError as error:
        return _produce_result(partition, Error.INVALID_PRODUCER_EPOCH, -1, str(error))
    except TransactionStateError as error:
        return _produce_result(partition, Error.INVALID_TXN_STATE, -1, str(error))
    except StorageError as error:
        log.warning("produce to %s-%d not stored: %s", topic, partition, error)
        return _produce_result(partition, Error.KAFKA_STORAGE_ERROR, -1, str(error))
    if partition_log.end_offset > end_before:
        broker.engine.on_produced(topic, partition, partition_log.batch_details(end_before))
        broker.notify_changed()
    return _produce_result(partition, Error.NONE, base_offset, start=partition_log.start_offset)


async def _read(broker, body) -> tuple[list[dict], int]:
    budget = body.max_bytes
    topics, total = [], 0
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            partition_log = broker.find_log(topic.topic, part.partition)
            if partition_log is None:
                partitions.append(_fetch_result(part.partition, Error.UNKNOWN_TOPIC_OR_PARTITION, -1))
                continue
            end, stable = partition_log.end_offset, partition_log.last_stable_offset
            if not partition_log.start_offset <= part.fetch_offset <= end:
                partitions.append(_fetch_result(part.partition, Error.OFFSET_OUT_OF_RANGE, end,
                                                partition_log.start_offset, stable=stable))
                continue
            key_ranges = getattr(part, "key_ranges", ())
            error = _key_ranges_error(broker, topic.topic, key_ranges)
            # read_committed (isolation level 1) reads below the last stable offset only.
            until = stable if body.isolation_level == 1 else end
            data, aborted = b"", None
            if error == Error.NONE and part.fetch_offset < until and budget > 0:
                data = partition_log.read(part.fetch_offset, min(part.partition_max_bytes, budget), until)
                if key_ranges:
                    error, data = await _filtered(broker, topic.topic, part.partition, data, pairs(key_ranges))
                budget -= len(data)
                total += len(data)
                if body.isolation_level == 1:
                    aborted = [{"producer_id": producer, "first_offset": first}
                               for producer, first in partition_log.aborted_transactions(part.fetch_offset, until - 1)]
            partitions.append(_fetch_result(part.partition, error, end, partition_log.start_offset, data,
                                            stable, aborted))
        topics.append({"topic": topic.topic, "partitions": partitions})
    return topics, total


async def _filtered(broker, topic: str, partition: int, data: bytes, ranges: list) -> tuple[str, bytes]:
    """(error, the records of `data` in `ranges`): filtered on a worker thread; a batch too costly to filter
    answers MESSAGE_TOO_LARGE for this partition, one that cannot be read CORRUPT_MESSAGE."""
    try:
        return Error.NONE, await broker.off_loop(functools.partial(
            filter_batches, data, ranges, limit_bytes=broker.config.ic.filtering_bytes, cache=broker.key_range_cache,
            cache_key=(topic, partition)))
    except FilterLimitExceeded as failure:
        log.warning("fetch of %s-%d: %s (max.bytes.fetcher.filtering)", topic, partition, failure)
        return Error.MESSAGE_TOO_LARGE, b""
    except BatchDecodeError as failure:
        log.warning("fetch of %s-%d: %s", topic, partition, failure)
        return Error.CORRUPT_MESSAGE, b""


def _key_ranges_error(broker, topic: str, key_ranges) -> str:
    """KR-11 at the broker: the topic's accept.range.fetch; INVALID_REQUEST for ill-formed ranges."""
    if not key_ranges:
        return Error.NONE
    try:
        ranges = pairs(key_ranges)
    except ValueError:
        return Error.INVALID_REQUEST
    return range_fetch_error(ranges, broker.topics.get(topic).accept_range_fetch, True)


def _fetch_result(index: int, error: str, high_watermark: int, start: int = -1, records: bytes = b"",
                  stable: int = -1, aborted: list[dict] | None = None) -> dict:
    return {"partition_index": index, "error_code": error, "high_watermark": high_watermark,
            "last_stable_offset": stable, "log_start_offset": start, "aborted_transactions": aborted,
            "preferred_read_replica": -1, "records": records}


def _list_offset(broker, topic: str, part) -> dict:
    partition_log = broker.find_log(topic, part.partition_index)
    if partition_log is None:
        return {"partition_index": part.partition_index, "error_code": Error.UNKNOWN_TOPIC_OR_PARTITION}
    if part.timestamp == LATEST_TIMESTAMP:
        offset = partition_log.end_offset
    elif part.timestamp == EARLIEST_TIMESTAMP:
        offset = partition_log.start_offset
    else:
        offset = partition_log.offset_for_timestamp(part.timestamp)
    return {"partition_index": part.partition_index, "error_code": Error.NONE, "timestamp": -1, "offset": offset,
            "leader_epoch": 0}
