"""ShareCoordinator: durable share-group state (KIP-932's share coordinator), on a local log.

The real counterpart of model/share_state.py. One coordinator owns one data
dir and holds the state of every share-partition key (`"group:topic:partition"`)
that was initialized in it.

    coordinator = ShareCoordinator(data_dir, config, fsync=True, trace_writer=None, now_ms=0, storage=None)
    coordinator.initialize(key, state_epoch, start_offset, now_ms) -> error
    coordinator.write(key, state_epoch, start_offset, batches, now_ms) -> error
        batches: [(first, last, state_id, delivery_count)], state ids as partition.py
        (0 available, 2 acknowledged, 4 archived); start_offset -1 = unchanged.
    coordinator.read(key, now_ms) -> (error, state_epoch, start_offset, batches)
    coordinator.delete(key, now_ms) -> error            # kafka-4.2's DeleteShareGroupState: a tombstone
    coordinator.summary(key) -> StateSummary(state_epoch, start_offset, delivery_complete_count) | None
    coordinator.keys(); coordinator.close()

Errors (spec/share-state.md): write or read of a key never initialized ->
INVALID_REQUEST (ST-3). kafka-4.2: initialize or write with a state epoch
below the highest one stored -> FENCED_STATE_EPOCH; epoch -1 skips the check
(ST-2, ST-5: an initialize with -1 stores -1) and a write's higher one is
accepted but not stored (ST-5, KAFKA-19456). kip: a write
must carry exactly the stored epoch (ST-4), may not persist `acquired` (ST-15),
and initialize refuses a negative epoch (ST-17). The log cannot be written ->
COORDINATOR_NOT_AVAILABLE, Kafka's retriable answer when its persister fails:
nothing is applied, the log is left as it was, and the next call writes again
as soon as the disk accepts it.

Records (payloads are JSON, framed by storage.durable_log.DurableLog: length + CRC-32C):
- profile kafka-4.2: `ShareSnapshot` {key, snapshot_epoch, state_epoch,
  start_offset, batches} replaces a key's state; `ShareUpdate` {key,
  snapshot_epoch, start_offset, batches} (no state epoch) is merged into it.
  Merge (PersisterStateBatchCombiner): union clipped at the start offset; on
  overlap the batch with the higher (delivery count, then state) wins, not the
  newer one; adjacent equal batches coalesce. After `updates_per_snapshot`
  (500) updates since the last snapshot, a write is stored as a snapshot of
  the merged state with snapshot_epoch + 1. Initialize always writes a snapshot.
  `ShareTombstone` {key} (delete, kafka-4.2 only, ST-33) forgets the key: its
  state, epochs and update count; a key without a state appends nothing.
- profile kip (seed 002): `ShareCheckpoint` {key, snapshot_epoch (the
  draft's CheckpointEpoch), state_epoch, start_offset, batches} and
  `ShareDelta` {key, snapshot_epoch, delta_index 0.., state_epoch,
  start_offset, batches}; a delta's batches overwrite the offsets they name
  (newer wins, ST-7); replay applies the latest checkpoint and then only
  deltas whose checkpoint epoch matches it (ST-11); a checkpoint is written
  after min(updates_per_snapshot, 256) deltas (the delta index is a uint8).
Live state and replayed state come from the same `_apply`, so a restart
rebuilds exactly what was acknowledged.

Durability: every initialize/write is appended and fsynced (fsync=True, the
default) BEFORE it is applied in memory and answered "NONE". So an answer of
NONE means the state is on disk: a share-partition that acknowledged a record
after its write returned never redelivers it after kill -9. A torn tail (a
write the crash cut) is detected by length/CRC at open and truncated; it was
never answered NONE. When the log outgrows `compact_bytes` it is rewritten as
one snapshot per key (atomically: temp file, fsync, rename, fsync dir); a
compaction the disk refuses leaves the log as it was and is tried again after
the next write.

Tracing: with a tracing.TraceWriter, every call is written to the key's
share-state trace; opening a coordinator on a data dir whose keys already
have share-state traces in the writer appends a `failover` step to each.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import msgspec

from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, STATE_NAMES
from kipcheck.impl.storage import Storage, StorageError
from kipcheck.impl.storage.durable_log import DurableLog
from kipcheck.model.errors import Error

LOG_NAME = "share-coordinator.log"
KIP_MAX_DELTAS = 256   # DeltaIndex is a uint8 (ST-9)
Batch = tuple[int, int, int, int]   # first, last, state id, delivery count
DONE_STATES = (ACKNOWLEDGED, ARCHIVED)

log = logging.getLogger("kipcheck.share")


class StateSummary(NamedTuple):
    state_epoch: int
    start_offset: int
    delivery_complete_count: int   # records at or above the start offset acknowledged or archived


@dataclass(slots=True)
class KeyState:
    state_epoch: int
    snapshot_epoch: int
    start_offset: int
    batches: list[Batch] = field(default_factory=list)
    updates: int = 0   # updates (deltas) since the last snapshot (checkpoint)
    # ST-2: the highest state epoch of the key's snapshots, what Kafka fences against (its stateEpochMap);
    # state_epoch can be lower after an initialize with -1.
    fence_epoch: int = 0


class ShareCoordinator:
    def __init__(self, data_dir: str | os.PathLike, config: ShareConfig | None = None, *, fsync: bool = True,
                 trace_writer=None, now_ms: int = 0, compact_bytes: int = 64 * 1024 * 1024,
                 storage: Storage | None = None) -> None:
        self.config = config or ShareConfig()
        self._kip = self.config.profile == "kip"
        self._per_snapshot = min(self.config.updates_per_snapshot, KIP_MAX_DELTAS) if self._kip \
            else self.config.updates_per_snapshot
        self._compact_bytes = compact_bytes
        self._trace_writer = trace_writer
        self._traced: set[str] = set()
        self._states: dict[str, KeyState] = {}
        self._log = DurableLog(Path(data_dir) / LOG_NAME, fsync=fsync, storage=storage)
        # ST-12: replay applies every record in order (kip: ST-11), before any request is answered, so
        # nothing is ever answered COORDINATOR_LOAD_IN_PROGRESS (ST-13).
        for payload in self._log.replay():
            self._apply(msgspec.json.decode(payload))
        self.truncated_bytes = self._log.truncated_bytes
        if trace_writer is not None:
            # A key's share-state trace continues across restarts; it starts with the key's first initialize.
            for key in trace_writer.state_keys():
                self._traced.add(key)
                self._trace_writer.state(key, self.trace_config()).step(now_ms, "coordinator", "failover", {})

    def keys(self) -> list[str]:
        return sorted(self._states)

    def holds(self, key: str) -> bool:
        """Whether `key` has a state (it was initialized and not deleted since)."""
        return key in self._states

    def trace_config(self) -> dict[str, int]:
        """The share-state trace header's config for this coordinator."""
        return {"deltas_per_checkpoint": self._per_snapshot}

    def close(self) -> None:
        self._log.close()

    # -- the three RPCs ----------------------------------------------------------------------

    def initialize(self, key: str, state_epoch: int, start_offset: int, now_ms: int = 0) -> str:
        current = self._states.get(key)
        if current is None and self._trace_writer is not None:
            self._traced.add(key)
        if state_epoch < 0 and self._kip:   # ST-17: a uint32 in the draft; Kafka 4.2 accepts it
            error = Error.INVALID_REQUEST
        elif current is not None and state_epoch < current.fence_epoch and (self._kip or state_epoch != -1):
            error = Error.FENCED_STATE_EPOCH                               # ST-2: kafka-4.2 does not fence -1
        else:
            epoch = 0 if current is None else current.snapshot_epoch + 1   # ST-31: an initialize appends a snapshot
            error = self._store(self._snapshot(key, epoch, state_epoch, start_offset, []))
        self._trace(key, now_ms, "initialize", {"state_epoch": state_epoch, "start_offset": start_offset},
                    {"error": error})
        return error

    def write(self, key: str, state_epoch: int, start_offset: int, batches: list[Batch], now_ms: int = 0) -> str:
        current = self._states.get(key)
        if current is None or start_offset < -1 or any(first > last or first < 0 for first, last, _, _ in batches):
            error = Error.INVALID_REQUEST                                  # ST-3
        elif self._kip and state_epoch != current.state_epoch:
            error = Error.FENCED_STATE_EPOCH                               # ST-4
        elif self._kip and any(state == ACQUIRED for _, _, state, _ in batches):
            error = Error.INVALID_REQUEST                                  # ST-15; Kafka 4.2 stores it (ST-16)
        elif not self._kip and state_epoch != -1 and state_epoch < current.fence_epoch:
            error = Error.FENCED_STATE_EPOCH                               # ST-5
        else:
            error = self._store(self._record_for_write(key, current, start_offset, batches))
        if key in self._traced:
            self._trace(key, now_ms, "write", {
                "state_epoch": state_epoch, "start_offset": start_offset,
                "batches": [_batch_json(batch) for batch in batches]}, {"error": error})
        return error

    def read(self, key: str, now_ms: int = 0) -> tuple[str, int, int, list[Batch]]:
        current = self._states.get(key)
        if current is None:
            answer = (Error.INVALID_REQUEST, -1, -1, [])                   # ST-3
        else:
            answer = (Error.NONE, current.state_epoch, current.start_offset, list(current.batches))   # ST-1
        error, state_epoch, start_offset, batches = answer
        if key in self._traced:
            self._trace(key, now_ms, "read", {}, {
                "error": error, "state_epoch": state_epoch, "start_offset": start_offset,
                "batches": [_batch_json(batch) for batch in batches]})
        return answer

    def delete(self, key: str, now_ms: int = 0) -> str:
        """ST-33 (kafka-4.2): DeleteShareGroupState, as the admin APIs that delete a share group's offsets ask it."""
        if self._kip:
            raise ValueError("the KIP's share coordinator deletes no state (seed 002 has no DeleteShareGroupState)")
        error = Error.NONE if key not in self._states else self._store({"type": "ShareTombstone", "key": key})
        self._trace(key, now_ms, "delete", {}, {"error": error})
        return error

    def summary(self, key: str) -> StateSummary | None:
        """`key`'s stored state in brief (None without one), as Kafka's ReadShareGroupStateSummary gives it to
        DescribeShareGroupOffsets; a summary, not a read of the state, so it is not traced."""
        current = self._states.get(key)
        if current is None:
            return None
        done = sum(last - max(first, current.start_offset) + 1 for first, last, state, _ in current.batches
                   if state in DONE_STATES and last >= current.start_offset)
        return StateSummary(current.state_epoch, current.start_offset, done)

    # -- records -----------------------------------------------------------------------------

    def _record_for_write(self, key: str, current: KeyState, start_offset: int, batches: list[Batch]) -> dict:
        """The record a write appends (ST-31): an update holding the batches given (ST-14), or a snapshot."""
        new_start = current.start_offset if start_offset == -1 else start_offset
        if current.updates < self._per_snapshot:
            kind = "ShareDelta" if self._kip else "ShareUpdate"
            return {"type": kind, "key": key, "snapshot_epoch": current.snapshot_epoch,
                    "state_epoch": current.state_epoch, "delta_index": current.updates,
                    "start_offset": start_offset, "batches": [list(batch) for batch in batches]}
        merged = _merge(current.batches, batches, new_start, self._kip)
        return self._snapshot(key, current.snapshot_epoch + 1, current.state_epoch, new_start, merged)

    def _snapshot(self, key: str, snapshot_epoch: int, state_epoch: int, start_offset: int,
                  batches: list[Batch]) -> dict:
        kind = "ShareCheckpoint" if self._kip else "ShareSnapshot"
        return {"type": kind, "key": key, "snapshot_epoch": snapshot_epoch, "state_epoch": state_epoch,
                "start_offset": start_offset, "batches": [list(batch) for batch in batches]}

    def _store(self, record: dict) -> str:
        try:
            self._log.append(msgspec.json.encode(record))
        except StorageError as error:
            log.warning("share state of %s not written: %s", record["key"], error)
            return Error.COORDINATOR_NOT_AVAILABLE   # ST-18: applied only once it is on disk
        self._apply(record)
        if self._log.size_bytes() > self._compact_bytes:
            self._compact()
        return Error.NONE

    def _apply(self, record: dict) -> None:
        """Apply one record to the in-memory state: the same code for live writes and replay."""
        key, kind = record["key"], record["type"]
        if kind == "ShareTombstone":
            self._states.pop(key, None)
            return
        batches = [tuple(batch) for batch in record["batches"]]
        if kind in ("ShareSnapshot", "ShareCheckpoint"):
            start = record["start_offset"]
            previous = self._states.get(key)
            # ST-10: Kafka resets its update count only when it had reached the limit.
            updates = previous.updates if kind == "ShareSnapshot" and previous is not None \
                and previous.updates < self._per_snapshot else 0
            # A compacted log keeps the fencing epoch in its snapshots (fence_epoch), so replay finds it again.
            fence_epoch = max(record.get("fence_epoch", record["state_epoch"]),
                              previous.fence_epoch if previous is not None else record["state_epoch"])
            self._states[key] = KeyState(record["state_epoch"], record["snapshot_epoch"], start,
                                         _merge([], batches, start, newer_wins=True), updates, fence_epoch)
            return
        current = self._states.get(key)
        if current is None or (kind == "ShareDelta" and record["snapshot_epoch"] != current.snapshot_epoch):
            return   # kip: a delta of an older checkpoint is not replayed
        if record["start_offset"] != -1:   # ST-6: -1 leaves the SPSO; _merge drops what lies below it
            current.start_offset = record["start_offset"]
        current.batches = _merge(current.batches, batches, current.start_offset, newer_wins=kind == "ShareDelta")
        current.updates += 1

    def _compact(self) -> None:
        """Rewrite the log as one snapshot per key, dropping every superseded record."""
        snapshots = [self._snapshot(key, state.snapshot_epoch + 1, state.state_epoch, state.start_offset,
                                    state.batches) | {"fence_epoch": state.fence_epoch}
                     for key, state in sorted(self._states.items())]
        try:
            self._log.rewrite(msgspec.json.encode(record) for record in snapshots)
        except StorageError as error:
            log.warning("share-state log not compacted (tried again after the next write): %s", error)
            return
        for record in snapshots:
            self._apply(record)

    def _trace(self, key: str, at_ms: int, op: str, args: dict, observed: dict) -> None:
        if key in self._traced:
            self._trace_writer.state(key, self.trace_config()).step(at_ms, "leader", op, args, observed)




def _batch_json(batch: Batch) -> dict:
    first, last, state, count = batch
    return {"first": first, "last": last, "state": STATE_NAMES.get(state, str(state)), "delivery_count": count}


def _merge(existing: list[Batch], incoming: list[Batch], start_offset: int, newer_wins: bool) -> list[Batch]:
    """Paint `incoming` over `existing`, clip below start_offset, coalesce adjacent equal batches.

    newer_wins=False is Kafka's combiner: on overlap the higher (delivery count, state) stays.
    """
    runs = sorted(existing)
    for batch in incoming:
        runs = _paint(runs, batch, newer_wins)
    clipped: list[Batch] = []
    for first, last, state, count in runs:
        if last < start_offset:
            continue
        first = max(first, start_offset)
        if clipped and clipped[-1][1] + 1 == first and clipped[-1][2:] == (state, count):
            clipped[-1] = (clipped[-1][0], last, state, count)
        else:
            clipped.append((first, last, state, count))
    return clipped


def _paint(runs: list[Batch], batch: Batch, newer_wins: bool) -> list[Batch]:
    first, last, state, count = batch
    out: list[Batch] = []
    kept: list[tuple[int, int]] = []   # parts of [first, last] where an old run stays
    for run in runs:
        run_first, run_last, run_state, run_count = run
        if run_last < first or run_first > last:
            out.append(run)
            continue
        if run_first < first:
            out.append((run_first, first - 1, run_state, run_count))
        if not newer_wins and (run_count, run_state) > (count, state):   # ST-8 (newer wins: ST-7)
            overlap = (max(first, run_first), min(last, run_last))
            out.append((overlap[0], overlap[1], run_state, run_count))
            kept.append(overlap)
        if run_last > last:
            out.append((last + 1, run_last, run_state, run_count))
    position = first
    for kept_first, kept_last in kept:
        if kept_first > position:
            out.append((position, kept_first - 1, state, count))
        position = kept_last + 1
    if position <= last:
        out.append((position, last, state, count))
    out.sort()
    return out
