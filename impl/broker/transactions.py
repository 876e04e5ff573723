"""The transaction coordinator of the one-node broker: transactional ids, their producers and markers.

    coordinator = TransactionCoordinator(data_dir, write_marker, fsync=True, storage=None)
        write_marker(topic, partition, producer_id, producer_epoch, commit): append the marker
        to that partition's log (PartitionLog.append_marker); StorageError if the disk refuses.
    coordinator.new_producer_id() -> int        # for an idempotent producer (not recorded)
    coordinator.init_producer_id(transactional_id) -> (error, producer_id, epoch)
    coordinator.add_partitions(transactional_id, producer_id, epoch, [(topic, partition), ...]) -> error
    coordinator.in_transaction(producer_id, epoch, topic, partition) -> error   # may a Produce write there?
    coordinator.end(transactional_id, producer_id, epoch, commit) -> error
    coordinator.close()

As Kafka's TransactionCoordinator, within what confluent-kafka's transactional
Producer uses (init_transactions, begin_transaction, produce, commit_transaction,
abort_transaction): InitProducerId gives a transactional id its producer id
(kept for good) and the next epoch, aborting a transaction the previous
incarnation left open; AddPartitionsToTxn records the partitions a
transaction writes; EndTxn writes a commit or abort marker to each of them.
An older epoch is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before EndTxn v2's
PRODUCER_FENCED), an unknown id or producer INVALID_PRODUCER_ID_MAPPING, an
EndTxn with nothing to end after a committed one of the other kind
INVALID_TXN_STATE. Offsets in transactions (AddOffsetsToTxn,
TxnOffsetCommit) are not served.

Durability: every change is one record of a DurableLog
(`<data dir>/transactions/transactions.log`, fsync'd before the answer); the
coordinator's state is the replay of it. EndTxn first records the decision
(PrepareCommit / PrepareAbort, as Kafka), then writes the markers, then
records the completion; a coordinator restarted between the two finishes
writing the markers before it answers anything (a partition that already has
the marker is skipped: its log has no open transaction of that producer any
more). A failed write answers COORDINATOR_NOT_AVAILABLE (retriable) and the
decision stays to be completed; nothing is acknowledged unless written.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kipcheck.impl.storage import Storage, StorageError
from kipcheck.impl.storage.durable_log import DurableLog
from kipcheck.model.errors import Error

log = logging.getLogger("kipcheck.broker")
LOG_NAME = "transactions.log"
EPOCH_MAX = 32767  # a producer epoch is an int16; Kafka gives a new producer id when it would overflow


@dataclass
class Transaction:
    """One transactional id: its producer, epoch, and the partitions of its open transaction."""

    producer_id: int
    epoch: int
    partitions: set[tuple[str, int]] = field(default_factory=set)
    ending: bool | None = None  # the decision recorded but not completed: True commit, False abort


class TransactionCoordinator:
    def __init__(self, data_dir: Path, write_marker: Callable[[str, int, int, int, bool], None],
                 fsync: bool = True, storage: Storage | None = None) -> None:
        storage = storage or Storage()
        storage.make_dirs(Path(data_dir))
        self._log = DurableLog(Path(data_dir) / LOG_NAME, fsync=fsync, storage=storage)
        self._write_marker = write_marker
        self._transactions: dict[str, Transaction] = {}
        # Unique across restarts: past every recorded producer id, and the wall clock for unrecorded ones.
        self._next_producer_id = int(time.time() * 1000)
        for payload in self._log.replay():
            self._apply(json.loads(payload))

    def new_producer_id(self) -> int:
        self._next_producer_id += 1
        return self._next_producer_id - 1

    def _apply(self, record: dict) -> None:
        """The state after one record, as both the live coordinator and the replay see it."""
        transaction = self._transactions.get(record["id"])
        if record["op"] == "init":
            self._transactions[record["id"]] = Transaction(record["producer_id"], record["epoch"])
            self._next_producer_id = max(self._next_producer_id, record["producer_id"] + 1)
        elif record["op"] == "add":
            transaction.partitions.update((topic, partition) for topic, partition in record["partitions"])
        elif record["op"] == "prepare":
            transaction.ending = record["commit"]
        else:  # "complete"
            transaction.partitions.clear()
            transaction.ending = None

    def _record(self, record: dict) -> None:
        """Write one record (StorageError if it fails, and then nothing changed), then apply it."""
        self._log.append(json.dumps(record, separators=(",", ":")).encode())
        self._apply(record)

    def init_producer_id(self, transactional_id: str) -> tuple[str, int, int]:
        transaction = self._transactions.get(transactional_id)
        try:
            if transaction is not None and (transaction.partitions or transaction.ending is not None):
                # A new incarnation fences the old one: its open transaction is aborted first.
                if transaction.ending is None:
                    self._record({"op": "prepare", "id": transactional_id, "commit": False})
                self._complete(transactional_id, transaction)
            if transaction is None or transaction.epoch >= EPOCH_MAX:
                producer_id, epoch = self._next_producer_id, 0
            else:
                producer_id, epoch = transaction.producer_id, transaction.epoch + 1
            self._record({"op": "init", "id": transactional_id, "producer_id": producer_id, "epoch": epoch})
        except StorageError as error:
            log.warning("transaction %s not initialized: %s", transactional_id, error)
            return Error.COORDINATOR_NOT_AVAILABLE, -1, -1
        return Error.NONE, producer_id, epoch

    def _check(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[str, Transaction | None]:
        transaction = self._transactions.get(transactional_id)
        if transaction is None or transaction.producer_id != producer_id:
            return Error.INVALID_PRODUCER_ID_MAPPING, None
        if epoch != transaction.epoch:
            return Error.PRODUCER_FENCED, None
        if transaction.ending is not None:
            try:
                self._complete(transactional_id, transaction)
            except StorageError:
                return Error.CONCURRENT_TRANSACTIONS, None
        return Error.NONE, transaction

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: list[tuple[str, int]]) -> str:
        error, transaction = self._check(transactional_id, producer_id, epoch)
        if transaction is None:
            return error
        new = sorted(set(partitions) - transaction.partitions)
        if new:
            try:
                self._record({"op": "add", "id": transactional_id, "partitions": new})
            except StorageError as failure:
                log.warning("partitions of transaction %s not added: %s", transactional_id, failure)
                return Error.COORDINATOR_NOT_AVAILABLE
        return Error.NONE

    def in_transaction(self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int) -> str:
        """May this producer write a transactional batch to topic-partition now? ("NONE" if so)."""
        transaction = self._transactions.get(transactional_id)
        if transaction is None or transaction.producer_id != producer_id:
            return Error.INVALID_PRODUCER_ID_MAPPING
        if epoch != transaction.epoch:
            return Error.INVALID_PRODUCER_EPOCH
        if (topic, partition) not in transaction.partitions or transaction.ending is not None:
            return Error.INVALID_TXN_STATE
        return Error.NONE

    def end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> str:
        error, transaction = self._check(transactional_id, producer_id, epoch)
        if transaction is None:
            return error
        if not transaction.partitions:
            return Error.NONE  # nothing was written: nothing to mark, as Kafka answers an empty transaction
        try:
            self._record({"op": "prepare", "id": transactional_id, "commit": commit})
            self._complete(transactional_id, transaction)
        except StorageError as failure:
            log.warning("transaction %s not completed yet: %s", transactional_id, failure)
            return Error.COORDINATOR_NOT_AVAILABLE
        return Error.NONE

    def _complete(self, transactional_id: str, transaction: Transaction) -> None:
        """Write the recorded decision's markers, then record the completion (StorageError: try again later)."""
        for topic, partition in sorted(transaction.partitions):
            self._write_marker(topic, partition, transaction.producer_id, transaction.epoch, bool(transaction.ending))
        self._record({"op": "complete", "id": transactional_id})

    def close(self) -> None:
        self._log.close()
