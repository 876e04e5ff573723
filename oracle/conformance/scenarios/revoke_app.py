"""ProcessingApp: an application on kipcheck's consumer that processes records asynchronously, as seed 001 describes.

    log = EventLog("member-a.jsonl")                  # or EventLog() in memory
    app = ProcessingApp(bootstrap, "g", "work", mode="delay", processing_ms=5, log=log, trace_dir=traces)
    thread = threading.Thread(target=app.run); thread.start()
    ...; app.stop(); thread.join()

One worker thread per partition processes its records in order, `processing_ms`
each (ordered processing, the usual reason to keep a partition on one
consumer); the poll loop hands records to the workers, pauses a partition
whose queue holds `queue[0]` records and resumes it at `queue[1]`, and commits
what the workers finished (ProcessedOffsets) every COMMIT_INTERVAL_MS. Modes:

- `delay`: KIP-983, the seed's option b poll loop: after each poll, the
  to-be-revoked partitions whose records are all processed are committed and
  let go; the others are delayed (delay_revoke); lost partitions are
  abandoned, nothing more is committed for them.
- `callback`: today's approach 2 (seed 001, "Approach 2"): on_revoke waits,
  inside poll, until the revoked partitions' records are processed, commits
  them synchronously and returns; no partition gets records meanwhile.
- `naive`: on_revoke commits what is finished and returns at once, while the
  workers still process what they hold: what the seed warns of, a control
  that shows records processed twice are measured.

With `flush_ms=(LOW, HIGH)` the commit path is slow, as in the applications
KIP-983 was written for: each partition's state (what its worker processed)
is flushed by a thread of its own, each flush taking between LOW and HIGH ms
(drawn per partition, the same draws in every mode), one flush after the
other while there is something new; only flushed offsets are committed. A
revoke then waits for the worker and for a flush started after it: `delay`
keeps polling meanwhile, `callback` waits inside on_revoke, `naive` commits
what the worker finished without flushing (its state is lost) and returns.

Every processed record is an event in the log: {"event": "record",
"partition", "offset", "at_ms"}; also "assign", "revoke" and "lost" with
"partitions" (as the application saw them), "commit" with "offsets"
({partition: next offset}, those answered NONE) and "error", and "closed"
(the format of group_member.py's log, one topic per application), and, with
`flush_ms`, "flushed" with "partition" and "offset" (the state of every
record below it that this member processed is durable). The log
is flushed per event, so a member killed -9 loses nothing it wrote.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import deque

from kipcheck.impl.consumer import CommitFailed, Consumer, KafkaError, TopicPartition
from kipcheck.impl.consumer.offsets import ProcessedOffsets
from kipcheck.model.errors import Error

MODES = ("delay", "callback", "naive")
QUEUE_HIGH, QUEUE_LOW = 40, 10  # defaults: a partition is paused at 40 waiting records, resumed at 10
COMMIT_INTERVAL_MS = 200
POLL_MS = 50


def now_ms() -> float:
    return time.monotonic() * 1000


class EventLog:
    def __init__(self, path=None):
        self._file = open(path, "a", encoding="utf-8") if path is not None else None
        self.events: list[dict] = []
        self._lock = threading.Lock()

    def write(self, **event) -> None:
        event.setdefault("at_ms", round(now_ms(), 3))
        with self._lock:
            self.events.append(event)
            if self._file is not None:
                self._file.write(json.dumps(event) + "\n")
                self._file.flush()

    def records(self) -> list[tuple[int, int]]:
        with self._lock:
            return [(event["partition"], event["offset"]) for event in self.events if event["event"] == "record"]


class Worker:
    """Processes one partition's records in order, in its own thread; with `flush_ms`, flushes its state in another."""

    def __init__(self, tp: TopicPartition, processed: ProcessedOffsets, processing_ms: float, log: EventLog,
                 flush_ms: tuple[float, float] | None = None):
        self.tp, self.processed, self.processing_s, self.log = tp, processed, processing_ms / 1000, log
        self.queue: deque = deque()
        self.busy = False
        self.condition = threading.Condition()
        self.aborted = False
        self.flushed = processed.commit_offset(tp)  # the state below it is durable (nothing of ours yet)
        self.flush_ms = flush_ms
        self.thread = threading.Thread(target=self._run, name=f"worker-{tp}", daemon=True)
        self.thread.start()
        if flush_ms is not None:
            threading.Thread(target=self._flush, args=(random.Random(tp.partition),), name=f"flusher-{tp}",
                             daemon=True).start()

    def submit(self, records) -> None:
        with self.condition:
            self.queue.extend(records)
            self.condition.notify_all()

    def backlog(self) -> int:
        with self.condition:
            return len(self.queue) + self.busy

    def settled(self) -> bool:
        """Nothing left to process, and (with a slow commit path) everything processed flushed."""
        with self.condition:
            return self._settled()

    def durable_offset(self) -> int:
        """What may be committed: the offset below which everything is processed (and flushed, with `flush_ms`)."""
        with self.condition:
            return self._durable()

    def wait_settled(self, timeout_s: float = 600) -> None:
        with self.condition:
            self.condition.wait_for(self._settled, timeout_s)

    def _settled(self) -> bool:
        return not self.queue and not self.busy and self._durable() == self.processed.commit_offset(self.tp)

    def _durable(self) -> int:
        return self.flushed if self.flush_ms is not None else self.processed.commit_offset(self.tp)

    def stop(self, abort: bool) -> None:
        """Abort: drop what is queued (a lost partition); otherwise finish it first (the naive mode's leftovers)."""
        with self.condition:
            self.aborted = True
            if abort:
                self.queue.clear()
            self.condition.notify_all()

    def _run(self) -> None:
        while True:
            with self.condition:
                self.condition.wait_for(lambda: self.queue or self.aborted)
                if not self.queue:
                    return
                record, self.busy = self.queue.popleft(), True
            time.sleep(self.processing_s)
            self.log.write(event="record", partition=record.partition, offset=record.offset)
            with self.condition:
                if not self.aborted:
                    self.processed.done(self.tp, record.offset)
                self.busy = False
                self.condition.notify_all()

    def _flush(self, draws: random.Random) -> None:
        """Flush the state of what is processed, one flush after another while there is something new."""
        while True:
            with self.condition:
                self.condition.wait_for(lambda: self.aborted or self.processed.commit_offset(self.tp) > self.flushed)
                if self.aborted:
                    return  # the partition is gone: its unflushed state with it
                target = self.processed.commit_offset(self.tp)
            time.sleep(draws.uniform(*self.flush_ms) / 1000)
            with self.condition:
                if self.aborted:
                    return
                self.flushed = target
                self.condition.notify_all()
            self.log.write(event="flushed", partition=self.tp.partition, offset=target)


class ProcessingApp:
    def __init__(self, bootstrap: str, group: str, topic: str, mode: str, processing_ms: float, log: EventLog,
                 trace_dir=None, queue: tuple[int, int] = (QUEUE_HIGH, QUEUE_LOW),
                 flush_ms: tuple[float, float] | None = None, **settings):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, found {mode!r}")
        self.topic, self.mode, self.processing_ms, self.log = topic, mode, processing_ms, log
        self.queue_high, self.queue_low = queue
        self.flush_ms = flush_ms
        config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "rebalance.revoke.mode": "delay" if mode == "delay" else "callback", **settings}
        self.consumer = Consumer(config, trace_dir=trace_dir)
        self.processed = ProcessedOffsets()
        self.workers: dict[TopicPartition, Worker] = {}
        self.committed: dict[TopicPartition, int] = {}
        self._stopping = threading.Event()
        self._last_commit_ms = now_ms()
        self._held: frozenset[TopicPartition] = frozenset()

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        if self.mode == "delay":
            self.consumer.subscribe([self.topic])
        else:
            self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked,
                                    on_lost=self._lost)
        try:
            while not self._stopping.is_set():
                self._dispatch(self.consumer.poll(POLL_MS))
                if self.mode == "delay":
                    self._after_poll()
                if now_ms() - self._last_commit_ms >= COMMIT_INTERVAL_MS:
                    self._last_commit_ms = now_ms()
                    self._commit(list(self.workers), asynchronous=True)
            self._finish()
        finally:
            for worker in self.workers.values():
                worker.stop(abort=True)
            self.consumer.close()
        self.log.write(event="closed")

    def _dispatch(self, records) -> None:
        by_partition: dict[TopicPartition, list] = {}
        for record in records:
            by_partition.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        for tp, batch in by_partition.items():
            if tp not in self.workers:
                self.processed.start(tp, batch[0].offset)
                self.workers[tp] = Worker(tp, self.processed, self.processing_ms, self.log, self.flush_ms)
            self.workers[tp].submit(batch)
        full = [tp for tp, worker in self.workers.items() if worker.backlog() >= self.queue_high]
        drained = [tp for tp, worker in self.workers.items() if worker.backlog() <= self.queue_low]
        self.consumer.pause(full)
        self.consumer.resume(drained)

    def _after_poll(self) -> None:
        """KIP-983, seed 001 step 1.d-e: lost partitions are abandoned; to-be-revoked ones finish or are delayed."""
        for tp in self.consumer.lost_partitions():
            self._drop(tp, abort=True)
            self.log.write(event="lost", partitions=[tp.partition])
        held = self.consumer.assignment()
        if held - self._held:
            self.log.write(event="assign", partitions=sorted(tp.partition for tp in held - self._held))
        self._held = held
        for tp in [tp for tp in self.workers if tp not in held]:
            self._drop(tp, abort=True)  # revoked at the start of this poll: finished and committed before
        revoking = self.consumer.to_be_revoked_partitions()
        busy = {tp for tp in revoking if tp in self.workers and not self.workers[tp].settled()}
        self._commit(sorted(revoking & set(self.workers) - busy), asynchronous=True)
        if busy and not self.consumer.delay_revoke(busy):
            return  # one was lost: the next poll reports it
        for tp in revoking - busy:
            self.log.write(event="revoke", partitions=[tp.partition])

    def _commit(self, partitions, asynchronous: bool, durable: bool = True) -> None:
        """Commit what is durable (processed, and flushed with `flush_ms`), or with `durable` false what is processed."""
        offsets = {tp: offset for tp in partitions if tp in self.workers
                   if (offset := self.workers[tp].durable_offset() if durable else self.processed.commit_offset(tp))
                   != self.committed.get(tp)}
        if not offsets:
            return
        try:
            self.consumer.commit(offsets, asynchronous=asynchronous,
                                 on_commit=lambda answers: self._committed(offsets, answers))
            if not asynchronous:
                self._committed(offsets, {tp: Error.NONE for tp in offsets})
        except (CommitFailed, KafkaError) as error:  # nothing committed
            self.log.write(event="commit", offsets={},
                           error=f"{sorted(tp.partition for tp in offsets)}: {error}")

    def _committed(self, offsets, answers) -> None:
        done = {tp: offset for tp, offset in offsets.items() if answers.get(tp) == Error.NONE}
        self.committed.update(done)
        self.log.write(event="commit", offsets={tp.partition: offset for tp, offset in done.items()},
                       error=None if len(done) == len(offsets) else str(answers))

    def _drop(self, tp: TopicPartition, abort: bool) -> None:
        worker = self.workers.pop(tp, None)
        if worker is not None:
            worker.stop(abort)
        self.processed.forget(tp)
        self.committed.pop(tp, None)

    def _finish(self) -> None:
        """Stop fetching, let the workers finish, commit everything, then leave."""
        self.consumer.pause(self.consumer.assignment())
        while not all(worker.settled() for worker in list(self.workers.values())):
            self.consumer.poll(POLL_MS)  # polls keep revokes moving meanwhile
            if self.mode == "delay":
                self._after_poll()
        self._commit(list(self.workers), asynchronous=False)

    # -- the callback modes' listener --------------------------------------------------------------

    def _assigned(self, consumer, partitions) -> None:
        self.log.write(event="assign", partitions=sorted(tp.partition for tp in partitions))

    def _revoked(self, consumer, partitions) -> None:
        if self.mode == "callback":
            for tp in partitions:
                if tp in self.workers:
                    self.workers[tp].wait_settled()
        self._commit(sorted(partitions), asynchronous=False, durable=self.mode == "callback")
        for tp in partitions:
            self._drop(tp, abort=self.mode == "callback")
        self.log.write(event="revoke", partitions=sorted(tp.partition for tp in partitions))

    def _lost(self, consumer, partitions) -> None:
        for tp in partitions:
            self._drop(tp, abort=True)
        self.log.write(event="lost", partitions=sorted(tp.partition for tp in partitions))
