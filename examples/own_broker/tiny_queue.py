"""A queue of your own: one partition's records shared by consumers under acquisition locks (KIP-932's
share-partition, in miniature), writing what it does as a kipcheck trace (TRACE-FORMAT.md) so that its
tests can have kipcheck judge it. Time is given to each call (`now_ms`), as a broker's clock would be.
"""

import json

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "available", "acquired", "acknowledged", "archived"
OUTCOMES = {"accept": ACKNOWLEDGED, "release": AVAILABLE, "reject": ARCHIVED}


class Record:
    def __init__(self):
        self.state, self.delivery_count, self.owner, self.deadline_ms = AVAILABLE, 0, None, None
        self.expired_from = None  # the consumer whose lock on it expired, until it is acquired again


class TinyQueue:
    expire_before_acknowledging = True

    def __init__(self, trace_path, lock_ms: int = 30000, delivery_limit: int = 5):
        self.lock_ms, self.delivery_limit = lock_ms, delivery_limit
        self.records: list[Record] = []
        self.end = 0  # one past the last offset ever acquired: acknowledging at or past it is INVALID_REQUEST
        self.trace, self.steps = open(trace_path, "w"), 0
        self._write({"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": "kip",
                     "config": {"record_lock_duration_ms": lock_ms, "delivery_count_limit": delivery_limit}})

    def append(self, now_ms: int, count: int) -> None:
        self._expire_locks(now_ms)
        self.records += [Record() for _ in range(count)]
        self._step(now_ms, "log", "append", {"count": count})

    def acquire(self, now_ms: int, consumer: str, max_records: int) -> list[int]:
        self._expire_locks(now_ms)
        offsets = [offset for offset, record in enumerate(self.records) if record.state == AVAILABLE][:max_records]
        for offset in offsets:
            record = self.records[offset]
            record.state, record.owner, record.expired_from = ACQUIRED, consumer, None
            record.delivery_count += 1
            record.deadline_ms = now_ms + self.lock_ms
            self.end = max(self.end, offset + 1)
        runs = []  # [first, last, delivery count] for each run of consecutive offsets with one count
        for offset in offsets:
            count = self.records[offset].delivery_count
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, count])
        self._step(now_ms, consumer, "acquire", {"max_records": max_records}, {"records": runs})
        return offsets

    def acknowledge(self, now_ms: int, consumer: str, first: int, last: int, outcome: str) -> str:
        if self.expire_before_acknowledging:
            self._expire_locks(now_ms)
        error = self._refusal(consumer, first, last)
        if error == "NONE":
            for record in self.records[first:last + 1]:
                record.owner = record.deadline_ms = None
                self._leave_acquired(record, OUTCOMES[outcome])
        self._step(now_ms, consumer, "acknowledge", {"batches": [{"first": first, "last": last, "type": outcome}]},
                   {"error": error})
        return error

    def close(self) -> None:
        self.trace.close()

    def _refusal(self, consumer: str, first: int, last: int) -> str:
        if last >= self.end:
            return "INVALID_REQUEST"
        for record in self.records[first:last + 1]:
            if record.state != ACQUIRED or record.owner != consumer:
                return "REQUEST_TIMED_OUT" if record.expired_from == consumer else "INVALID_RECORD_STATE"
        return "NONE"

    def _expire_locks(self, now_ms: int) -> None:
        for record in self.records:
            if record.state == ACQUIRED and record.deadline_ms <= now_ms:
                record.expired_from, record.owner, record.deadline_ms = record.owner, None, None
                self._leave_acquired(record, AVAILABLE)

    def _leave_acquired(self, record: Record, state: str) -> None:
        at_the_limit = state == AVAILABLE and record.delivery_count >= self.delivery_limit
        record.state = ARCHIVED if at_the_limit else state

    def _step(self, now_ms: int, actor: str, op: str, args: dict, observed: dict | None = None) -> None:
        self.steps += 1
        step = {"step": self.steps, "at_ms": now_ms, "actor": actor, "op": op, "args": args}
        self._write(step if observed is None else {**step, "observed": observed})

    def _write(self, line: dict) -> None:
        self.trace.write(json.dumps(line) + "\n")
