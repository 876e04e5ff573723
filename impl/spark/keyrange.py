"""kipcheck-keyrange: each Kafka partition read as k hashed key ranges, one Spark task each.

    spark.readStream.format("kipcheck-keyrange")
        .option("kafka.bootstrap.servers", servers).option("subscribe", "orders")
        .option("keyRangesPerPartition", 4).option("kafka.group.id", "billing")
        .load()

Offsets are Spark's Kafka source offsets, `{"topic": {"partition": next offset}}`,
kept in Spark's checkpoint, so a restarted query resumes exactly after the
last committed micro-batch and re-runs an uncommitted one. Each micro-batch
range [start, end) of a partition becomes keyRangesPerPartition (k) tasks;
task i reads the records whose key hash lies in key range i, `split(k)[i]` of
the key-range assignor (model/key_range_assign.py; the hash is
model/key_hash.py's, the one the broker filters with). With
keyRangeFetch=broker (the default) each task fetches only its key range: a
Fetch carrying KeyRanges through kipcheck's consumer (impl/consumer), the
broker filters (the topic needs accept.range.fetch=true when k > 1); with
keyRangeFetch=client each task fetches the whole range and keeps its own
records (each record fetched k times). With kafka.group.id, Spark's
commit(end) of a micro-batch commits the group's offsets below `end` as an
individual commit (commit.py); startingOffsets=committed starts a new query
there.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Iterator

from confluent_kafka import Consumer, KafkaException, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from kipcheck.impl import consumer as kio
from kipcheck.impl.spark.commit import RangeCommitter
from kipcheck.impl.spark.options import Option, OptionError, boolean, one_of, parse, positive_int
from kipcheck.impl.spark.rows import arrow_schema, consumer_record_batch, ddl
from kipcheck.impl.spark.traces import IcTraces, now_ms
from kipcheck.model.errors import Error
from kipcheck.model.key_hash import in_ranges, record_hash
from kipcheck.model.key_range_assign import split

NAME = "kipcheck-keyrange"
log = logging.getLogger(__name__)
EARLIEST, LATEST = -2, -1  # as in Spark's JSON offsets
POLL_RECORDS = 10_000  # max.poll.records of a task's consumer: one Arrow batch per poll
POLL_MS = 200
BROKER, CLIENT = "broker", "client"
METADATA_TIMEOUT_S = 30.0
REFUSED = {"acknowledgementmode": "acknowledgements belong to kipcheck-share",
           "staginglocation": "kipcheck-keyrange replays from Kafka itself"}


def offsets_spec(name: str, value: str):
    """earliest, latest, committed, or Spark's JSON {"topic": {"partition": offset}} (-2 earliest, -1 latest)."""
    if value in ("earliest", "latest", "committed"):
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = None
    valid = isinstance(parsed, dict) and all(
        isinstance(partitions, dict) and all(key.isdigit() and type(offset) is int and offset >= -2
                                             for key, offset in partitions.items())
        for partitions in parsed.values())
    if not valid:
        raise OptionError(f"option {name} must be earliest, latest, committed or JSON like "
                          f'{{"topic": {{"0": 23, "1": -2}}}} (-2 earliest, -1 latest), found {value!r}')
    return {topic: {int(key): offset for key, offset in partitions.items()} for topic, partitions in parsed.items()}


OPTIONS = (
    Option("startingOffsets", offsets_spec),
    Option("endingOffsets", offsets_spec, "latest"),
    Option("failOnDataLoss", boolean, True),
    Option("keyRangesPerPartition", positive_int, 1),
    Option("keyRangeFetch", one_of(BROKER, CLIENT), BROKER),
    Option("kafkaConsumer.pollTimeoutMs", positive_int, 120_000),
)


def settings_of(options, streaming: bool) -> dict:
    settings = parse(options, OPTIONS, NAME, REFUSED)
    settings["startingOffsets"] = settings["startingOffsets"] or ("latest" if streaming else "earliest")
    if "committed" in (settings["startingOffsets"], settings["endingOffsets"]) and "group.id" not in settings["kafka"]:
        raise OptionError(f"{NAME}: startingOffsets=committed needs option kafka.group.id")
    if settings["endingOffsets"] in ("earliest", "committed"):
        raise OptionError(f"{NAME}: endingOffsets must be latest or JSON offsets")
    if streaming and "endingoffsets" in {key.lower() for key in options}:
        raise OptionError(f"{NAME}: endingOffsets is for batch queries (a stream has no end)")
    if settings["traceLocation"] and "group.id" not in settings["kafka"]:
        raise OptionError(f"{NAME}: traceLocation traces the group's commits and needs option kafka.group.id")
    return settings


class KipcheckKeyRange(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return ddl(delivery_count=False, headers=parse(self.options, OPTIONS, NAME, REFUSED)["includeHeaders"])

    def streamReader(self, schema) -> "KeyRangeStreamReader":
        return KeyRangeStreamReader(settings_of(self.options, streaming=True))

    def reader(self, schema) -> "KeyRangeBatchReader":
        return KeyRangeBatchReader(settings_of(self.options, streaming=False))


class KeyRangeSlice(InputPartition):
    """Key range `key_range` of `key_ranges` within offsets [start, end) of topic:partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int, key_range: int, key_ranges: int) -> None:
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self.key_range, self.key_ranges = key_range, key_ranges

    def hash_range(self) -> tuple[int, int]:
        """The slice's closed range of key hashes (model/key_hash.py record_hash)."""
        return split(self.key_ranges)[self.key_range]


def slices(settings: dict, start: dict, end: dict, offsets: "OffsetReader") -> list[KeyRangeSlice]:
    """k tasks for every partition with records between `start` and `end` (JSON offset dicts).

    A partition missing from `start` appeared after it: it is read from its earliest offset.
    """
    ranges = settings["keyRangesPerPartition"]
    found = []
    for topic, partitions in sorted(end.items()):
        for partition, last in sorted(partitions.items(), key=lambda item: int(item[0])):
            first = start.get(topic, {}).get(partition)
            if first is None:
                first = offsets.watermarks(topic, int(partition))[0]
            if first < last:
                found += [KeyRangeSlice(topic, int(partition), first, last, index, ranges) for index in range(ranges)]
    return found


class OffsetReader:
    """Partitions and their low and high watermarks (Metadata, ListOffsets), from a Consumer that never joins."""

    def __init__(self, settings: dict) -> None:
        self.settings = settings
        self.consumer = Consumer({**settings["kafka"], "group.id": settings["kafka"].get("group.id", NAME),
                                  "enable.auto.commit": False})

    def partitions(self) -> list[tuple[str, int]]:
        found = []
        for topic in self.settings["subscribe"]:
            metadata = self.consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics[topic]
            if metadata.error is not None:
                raise KafkaException(metadata.error)
            found += [(topic, partition) for partition in sorted(metadata.partitions)]
        return found

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S)

    def resolve(self, spec, committed: dict | None = None) -> dict:
        """startingOffsets or endingOffsets as offsets of every subscribed partition: {topic: {"p": offset}}."""
        resolved: dict[str, dict[str, int]] = {}
        for topic, partition in self.partitions():
            low, high = self.watermarks(topic, partition)
            if isinstance(spec, dict):
                if partition not in spec.get(topic, {}):
                    raise OptionError(f"{NAME}: JSON offsets must name every partition of the subscribed topics; "
                                      f"{topic}:{partition} is missing (use -2 for earliest, -1 for latest)")
                wanted = spec[topic][partition]
                offset = low if wanted == EARLIEST else high if wanted == LATEST else wanted
            elif spec == "committed" and committed.get((topic, partition), -1) >= 0:
                offset = committed[(topic, partition)] + 1
            else:
                offset = high if spec == "latest" else low
            resolved.setdefault(topic, {})[str(partition)] = offset
        return resolved

    def close(self) -> None:
        self.consumer.close()


def read_slice(settings: dict, piece: KeyRangeSlice, fetched_bytes: list[int] | None = None) -> Iterator:
    """The records of offsets [start, end) of one partition whose key hash is in the slice's key range.

    `fetched_bytes`, if given, gets the record bytes the slice's consumer fetched appended (bench/)."""
    schema = arrow_schema(delivery_count=False, headers=settings["includeHeaders"])
    broker_side = settings["keyRangeFetch"] == BROKER
    tp, hash_range = kio.TopicPartition(piece.topic, piece.partition), piece.hash_range()
    consumer = kio.Consumer({"bootstrap.servers": settings["kafka"]["bootstrap.servers"],
                             "max.poll.records": POLL_RECORDS,
                             "auto.offset.reset": "none" if settings["failOnDataLoss"] else "earliest"})
    deadline = time.monotonic() + settings["kafkaConsumer.pollTimeoutMs"] / 1000
    try:
        consumer.assign({tp: [hash_range] if broker_side else []})   # []: every key, filtered here
        consumer.seek(tp, piece.start)
        while consumer.position(tp) < piece.end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{NAME}: offsets [{consumer.position(tp)}, {piece.end}) of {tp} were not read "
                                   f"within kafkaConsumer.pollTimeoutMs={settings['kafkaConsumer.pollTimeoutMs']}")
            kept = [record for record in consumer.poll(POLL_MS) if record.offset < piece.end
                    and (broker_side or in_ranges(record_hash(record.key, record.offset), [hash_range]))]
            if kept:
                yield consumer_record_batch(kept, schema)
    except kio.KafkaError as error:
        raise read_error(error, tp) from None
    finally:
        if fetched_bytes is not None:
            fetched_bytes.append(consumer.fetcher.fetched_bytes)
        consumer.close()


def read_error(error: kio.KafkaError, tp: kio.TopicPartition) -> KafkaException:
    if error.error == Error.OFFSET_OUT_OF_RANGE:
        return KafkaException(f"{NAME}: the offsets to read from {tp} are out of range (data lost to retention "
                              f"or a deleted topic); set failOnDataLoss=false to go on without them: {error}")
    if error.error == Error.TOPIC_RANGE_FETCH_NOT_ALLOWED:
        return KafkaException(f"{NAME}: topic {tp.topic} does not accept key-range fetch: set its topic config "
                              f"accept.range.fetch=true, or the option keyRangeFetch=client: {error}")
    return KafkaException(f"{NAME}: reading {tp} failed: {error}")


class KeyRangeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, settings: dict) -> None:
        self.settings = settings
        self._offsets: OffsetReader | None = None  # created in Spark's source process, never pickled
        self._committer: RangeCommitter | None = None
        self._traces: IcTraces | None = None
        self._target: dict | None = None  # availableNow: the end offsets when the query started

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_offsets": None, "_committer": None, "_traces": None}

    def _reader(self) -> OffsetReader:
        if self._offsets is None:
            self._offsets = OffsetReader(self.settings)
            if "group.id" in self.settings["kafka"]:
                self._committer = RangeCommitter(self.settings["kafka"], METADATA_TIMEOUT_S)
            if self.settings["traceLocation"]:
                self._traces = IcTraces(self.settings["traceLocation"], self.settings["kafka"]["group.id"], NAME)
        return self._offsets

    def initialOffset(self) -> dict:
        spec = self.settings["startingOffsets"]
        reader = self._reader()
        committed = self._committer.committed(reader.partitions()) if spec == "committed" else None
        return reader.resolve(spec, committed)

    def getDefaultReadLimit(self):
        limit = self.settings["maxOffsetsPerTrigger"]
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._reader().resolve("latest")

    def latestOffset(self, start: dict, limit=None) -> dict:
        end = self._target or self._reader().resolve("latest")
        return capped(start, end, limit.max_rows if isinstance(limit, ReadMaxRows) else None)

    def partitions(self, start: dict, end: dict) -> list[KeyRangeSlice]:
        return slices(self.settings, start, end, self._reader())

    def read(self, partition: KeyRangeSlice) -> Iterator:
        return read_slice(self.settings, partition)

    def commit(self, end: dict) -> None:
        """Spark committed every micro-batch up to `end`: commit the group's offsets below it."""
        self._reader()
        if self._committer is not None:
            commit_below(self._committer, self._traces, end)

    def stop(self) -> None:
        for part in (self._offsets, self._committer, self._traces):
            if part is not None:
                part.close()
        self._offsets = self._committer = self._traces = None


def capped(start: dict, end: dict, max_rows: int | None) -> dict:
    """`end`, or with more than `max_rows` records after `start`, a share of them per partition by backlog."""
    backlog = {(topic, partition): max(0, last - start.get(topic, {}).get(partition, last))
               for topic, partitions in end.items() for partition, last in partitions.items()}
    total = sum(backlog.values())
    if max_rows is None or total <= max_rows:
        return end
    capped_end = {topic: dict(partitions) for topic, partitions in end.items()}
    for (topic, partition), size in backlog.items():
        if size:
            share = max(1, size * max_rows // total)
            capped_end[topic][partition] = start[topic][partition] + min(size, share)
    return capped_end


def commit_below(committer: RangeCommitter, traces: IcTraces | None, end: dict) -> None:
    """Commit, per partition, the offsets below `end` that are not committed yet (never moving back)."""
    keys = [(topic, int(partition)) for topic, partitions in end.items() for partition in partitions]
    try:
        stable = committer.committed(keys)
    except kio.KafkaError as error:
        log.warning("%s: reading the group's committed offsets failed (%s); the next micro-batch commits", NAME, error)
        return
    ranges = {(topic, partition): [(stable[(topic, partition)] + 1, end[topic][str(partition)] - 1)]
              for topic, partition in keys if end[topic][str(partition)] - 1 > stable[(topic, partition)]}
    at_ms = now_ms()
    if traces is not None:
        for (topic, partition), offset in stable.items():
            traces.fetched(at_ms, topic, partition, offset)
    if not ranges:
        return
    errors = committer.commit(ranges)
    for key, error in errors.items():
        if error != Error.NONE:
            log.warning("%s: committing offsets of %s:%s answered %s", NAME, *key, error)
        if traces is not None:
            traces.committed(at_ms, *key, [list(pair) for pair in ranges[key]], error)
    if traces is not None:  # the stable offsets after the commit, for the oracle
        try:
            for (topic, partition), offset in committer.committed(list(ranges)).items():
                traces.fetched(now_ms(), topic, partition, offset)
        except kio.KafkaError as error:
            log.warning("%s: reading the group's committed offsets back failed (%s)", NAME, error)


class KeyRangeBatchReader(DataSourceReader):
    def __init__(self, settings: dict) -> None:
        self.settings = settings

    def partitions(self) -> list[KeyRangeSlice]:
        offsets = OffsetReader(self.settings)
        try:
            committed = None
            if self.settings["startingOffsets"] == "committed":
                committer = RangeCommitter(self.settings["kafka"], METADATA_TIMEOUT_S)
                committed = committer.committed(offsets.partitions())
                committer.close()
            start = offsets.resolve(self.settings["startingOffsets"], committed)
            return slices(self.settings, start, offsets.resolve(self.settings["endingOffsets"]), offsets)
        finally:
            offsets.close()

    def read(self, partition: KeyRangeSlice) -> Iterator:
        return read_slice(self.settings, partition)
