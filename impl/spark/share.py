"""kipcheck-share: a Spark source that reads topics through a KIP-932 share group.

    spark.readStream.format("kipcheck-share")
        .option("kafka.bootstrap.servers", servers).option("subscribe", "orders")
        .option("kafka.group.id", "billing").option("stagingLocation", "/data/billing-staging")
        .load()

Streaming (acknowledgementMode=commit, the default): the query's one share
consumer lives in Spark's long-lived source process on the driver. Each
micro-batch is one poll: `latestOffset` acquires the records, stages them
(staging.py) and names the batch `{"batch": n}`; the tasks read the staged
rows, so a retried task or a re-run batch reads the same rows. The records
are accepted only once Spark has committed their batch: Spark asks
`latestOffset(start)` for the next batch only after it wrote the commit of
every batch ending at or before `start`, and `commit(end)` says the same
later, so either accepts what they prove committed (at-least-once end to
end; spec/spark-connectors.md has the argument and the failure cases).

Batch reads (acknowledgementMode=task, the only mode a batch read has): each
of minPartitions tasks runs its own share consumer, polls until the group has
nothing more for it, and accepts a poll's records once it has handed them on.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Iterator

from confluent_kafka import KafkaException, ShareConsumer
from confluent_kafka import AcknowledgeType
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from kipcheck.impl.spark.options import Option, OptionError, boolean, one_of, parse, positive_int, text
from kipcheck.impl.spark.rows import arrow_schema, ddl, record_batch
from kipcheck.impl.spark.staging import StagedBatchMissing, StagingStore
from kipcheck.impl.spark.traces import ShareTraces, now_ms
from kipcheck.model.errors import Error

NAME = "kipcheck-share"
log = logging.getLogger(__name__)
STREAM_POLL_WAIT_S = 0.5  # one poll per trigger; an idle query polls again at its next trigger
DEFAULT_MAX_POLL_RECORDS = 500  # librdkafka's max.poll.records
OPTIONS = (
    Option("stagingLocation", text),
    Option("acknowledgementMode", one_of("commit", "task")),
    Option("minPartitions", positive_int, 1),
    Option("failOnDataLoss", boolean, True),
    Option("kafkaConsumer.pollTimeoutMs", positive_int, 10_000),
)
REFUSED = {
    "startingoffsets": "a share group starts at its share-partition start offset (group config share.auto.offset.reset)",
    "endingoffsets": "a share group has no end: a batch read takes what the group hands out until it has no more",
    "keyrangesperpartition": "key ranges belong to kipcheck-keyrange",
}


def settings_of(options, streaming: bool) -> dict:
    settings = parse(options, OPTIONS, NAME, REFUSED)
    if "group.id" not in settings["kafka"]:
        raise OptionError(f"{NAME} needs option kafka.group.id: the share group to read through")
    mode = settings["acknowledgementMode"] or ("commit" if streaming else "task")
    if streaming and mode == "commit" and settings["stagingLocation"] is None:
        raise OptionError(f"{NAME} needs option stagingLocation (a directory beside the checkpoint) to replay "
                          f"micro-batches: a share group does not hand the same records out twice")
    if not streaming and mode == "commit":
        raise OptionError(f"{NAME}: acknowledgementMode=commit needs a streaming query (Spark tells a batch source "
                          f"nothing when its job commits); use readStream with trigger(availableNow=True)")
    if streaming and mode == "task":
        raise OptionError(f"{NAME}: a streaming query acknowledges with acknowledgementMode=commit")
    settings["acknowledgementMode"] = mode
    return settings


class KipcheckShare(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return ddl(delivery_count=True, headers=parse(self.options, OPTIONS, NAME, REFUSED)["includeHeaders"])

    def streamReader(self, schema) -> "ShareStreamReader":
        return ShareStreamReader(settings_of(self.options, streaming=True))

    def reader(self, schema) -> "ShareBatchReader":
        return ShareBatchReader(settings_of(self.options, streaming=False))


def error_name(outcome) -> str:
    """A commit result (None or KafkaException) as Kafka's error name."""
    return Error.NONE if outcome is None else outcome.args[0].name()


def runs_by_partition(messages) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    """Offsets per topic-partition as ascending runs (first, last, delivery_count)."""
    runs: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for message in sorted(messages, key=lambda m: (m.topic(), m.partition(), m.offset())):
        found = runs.setdefault((message.topic(), message.partition()), [])
        offset, count = message.offset(), message.delivery_count()
        if found and found[-1][1] == offset - 1 and found[-1][2] == count:
            found[-1] = (found[-1][0], offset, count)
        else:
            found.append((offset, offset, count))
    return runs


class ShareAcquirer:
    """One share consumer in explicit acknowledgement mode: polls, accepts, traces what it saw."""

    def __init__(self, settings: dict, traced: bool) -> None:
        # log_level 3: librdkafka's notice that the share consumer is a preview is not the user's business.
        config = {"log_level": "3", **settings["kafka"], "share.acknowledgement.mode": "explicit"}
        config.setdefault("max.poll.records", str(settings["maxOffsetsPerTrigger"] or DEFAULT_MAX_POLL_RECORDS))
        self.max_records = int(config["max.poll.records"])
        self.consumer = ShareConsumer(config)
        self.consumer.subscribe(list(settings["subscribe"]))
        self.traces = None
        if traced and settings["traceLocation"]:
            self.traces = ShareTraces(settings["traceLocation"], config["group.id"], settings["traceProfile"],
                                      settings["traceConfig"], actor=f"spark-{os.getpid()}")

    def poll(self, wait_s: float) -> list:
        """One poll's records (its errors logged, a fatal one raised)."""
        at_ms = now_ms()
        messages = []
        for message in self.consumer.poll(wait_s):
            error = message.error()
            if error is None:
                messages.append(message)
            elif error.fatal():
                raise KafkaException(error)
            else:
                log.warning("%s: share consumer: %s", NAME, error)
        if self.traces is not None:
            for (topic, partition), runs in runs_by_partition(messages).items():
                self.traces.partition(topic, partition).acquired(at_ms, self.max_records, [list(r) for r in runs])
        return messages

    def accept(self, runs: dict[tuple[str, int], list[tuple[int, int, int]]]) -> dict[tuple[str, int], str]:
        """Accept the records of `runs` (one commit) and return each partition's error name."""
        for (topic, partition), partition_runs in runs.items():
            for first, last, _ in partition_runs:
                for offset in range(first, last + 1):
                    self.consumer.acknowledge_offset(topic, partition, offset, AcknowledgeType.ACCEPT)
        at_ms = now_ms()
        results = {(tp.topic, tp.partition): error_name(outcome) for tp, outcome in self.consumer.commit_sync().items()}
        for key, partition_runs in runs.items():
            error = results.get(key)
            if error != Error.NONE:
                log.warning("%s: accepting records of %s:%s answered %s", NAME, *key, error)
            if self.traces is not None:
                self.traces.partition(*key).acknowledged(at_ms, accepted_batches(partition_runs), error)
        return results

    def close(self) -> None:
        """Leave the group: records acquired and not accepted are released for redelivery."""
        try:
            self.consumer.close()
        finally:
            if self.traces is not None:
                self.traces.close(now_ms())


def accepted_batches(runs: list[tuple[int, int, int]]) -> list[tuple[int, int, str]]:
    batches: list[tuple[int, int, str]] = []
    for first, last, _ in runs:
        if batches and batches[-1][1] == first - 1:
            batches[-1] = (batches[-1][0], last, "accept")
        else:
            batches.append((first, last, "accept"))
    return batches


class StagedSlice(InputPartition):
    """Rows [first_row, first_row + rows) of staged micro-batch `batch`."""

    def __init__(self, batch: int, first_row: int, rows: int) -> None:
        self.batch, self.first_row, self.rows = batch, first_row, rows


class ShareStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of one poll each, staged for replay, accepted once Spark committed them."""

    def __init__(self, settings: dict) -> None:
        self.settings = settings
        self.schema = arrow_schema(delivery_count=True, headers=settings["includeHeaders"])
        self.staging = StagingStore(settings["stagingLocation"])
        self.available_now = False
        self._acquirer: ShareAcquirer | None = None  # created in Spark's source process, never pickled
        self._pending: tuple[int, dict] | None = None  # (batch, its runs) staged and not yet accepted

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_acquirer": None, "_pending": None}

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = True

    def latestOffset(self, start: dict, limit=None) -> dict:
        batch = int(start["batch"])
        first_call = self._acquirer is None
        if first_call:
            self._acquirer = ShareAcquirer(self.settings, traced=True)
        self.accept_committed(batch)
        # Keep the last committed batch (a restarted query may re-run it) and the pending one;
        # on the first call, batches from `batch` on were staged by a process that died before
        # Spark planned them: their records were never accepted and come back from the group.
        self.staging.discard(keep_from=batch - 1, keep_below=batch if first_call else batch + 1)
        if self._pending is not None:  # asked again before the planned batch ran: the same batch
            return {"batch": self._pending[0] + 1}
        messages = self._poll()
        if not messages:
            return start
        self.staging.stage(batch, record_batch(messages, self.schema))
        self._pending = (batch, runs_by_partition(messages))
        return {"batch": batch + 1}

    def _poll(self) -> list:
        if not self.available_now:
            return self._acquirer.poll(STREAM_POLL_WAIT_S)
        # availableNow ends at the first batch with nothing: wait up to the poll timeout for one,
        # since a consumer that just joined gets nothing until the group assigns it partitions.
        deadline = time.monotonic() + self.settings["kafkaConsumer.pollTimeoutMs"] / 1000
        while not (messages := self._acquirer.poll(STREAM_POLL_WAIT_S)) and time.monotonic() < deadline:
            pass
        return messages

    def accept_committed(self, committed_end: int) -> None:
        """Accept the pending batch if it ends at or before `committed_end` (Spark committed it)."""
        if self._pending is not None and self._pending[0] < committed_end:
            runs = self._pending[1]
            self._pending = None
            self._acquirer.accept(runs)

    def partitions(self, start: dict, end: dict) -> list[StagedSlice]:
        slices = []
        for batch in range(int(start["batch"]), int(end["batch"])):
            try:
                rows = self.staging.rows(batch)
            except StagedBatchMissing:
                if self.settings["failOnDataLoss"]:
                    raise
                log.warning("%s: micro-batch %d is missing from the staging location; skipped "
                            "(failOnDataLoss=false)", NAME, batch)
                continue
            parts = min(self.settings["minPartitions"], rows)
            bounds = [rows * part // parts for part in range(parts + 1)]
            slices += [StagedSlice(batch, bounds[part], bounds[part + 1] - bounds[part]) for part in range(parts)]
        return slices

    def read(self, partition: StagedSlice) -> Iterator:
        yield from self.staging.read(partition.batch, partition.first_row, partition.rows, self.schema)

    def commit(self, end: dict) -> None:
        if self._acquirer is not None:
            self.accept_committed(int(end["batch"]))

    def stop(self) -> None:
        if self._acquirer is not None:
            acquirer, self._acquirer = self._acquirer, None
            acquirer.close()


class TaskSlot(InputPartition):
    def __init__(self, index: int, max_records: int | None) -> None:
        self.index, self.max_records = index, max_records


class ShareBatchReader(DataSourceReader):
    """minPartitions tasks, each with its own share consumer, accepting each poll once handed on."""

    def __init__(self, settings: dict) -> None:
        self.settings = settings
        self.schema = arrow_schema(delivery_count=True, headers=settings["includeHeaders"])

    def partitions(self) -> list[TaskSlot]:
        tasks, limit = self.settings["minPartitions"], self.settings["maxOffsetsPerTrigger"]
        return [TaskSlot(index, None if limit is None else limit * (index + 1) // tasks - limit * index // tasks)
                for index in range(tasks)]

    def read(self, partition: TaskSlot) -> Iterator:
        acquirer = ShareAcquirer(self.settings, traced=False)
        deadline = time.monotonic() + self.settings["kafkaConsumer.pollTimeoutMs"] / 1000
        left = partition.max_records
        try:
            while (left is None or left > 0) and time.monotonic() < deadline:
                messages = acquirer.poll(STREAM_POLL_WAIT_S)
                if not messages:
                    continue
                yield record_batch(messages, self.schema)  # resumed once Spark took the rows
                acquirer.accept(runs_by_partition(messages))
                # The group had records for this task: it is done at the first poll without any.
                deadline = time.monotonic() + STREAM_POLL_WAIT_S
                left = None if left is None else left - len(messages)
        finally:
            acquirer.close()
