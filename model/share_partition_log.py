"""What a Kafka 4.2 share-partition reads from its log besides the records: transactions, compaction, log start.

Clause ids refer to spec/share-partition.md (SP-60..SP-65). Shared by
model/share_partition.py and the fast acceptor oracle/judges/fast/share_partition.py,
so both read the same facts: which offsets are past the last stable offset,
which data batches belong to aborted transactions, which batches compaction
removed. Pure: no I/O, no clock.

    log = LogFacts(isolation_level="read_committed", profile="kafka-4.2")
    log.append(first, count, producer)      # producer None: not transactional (SP-61)
    log.end_transaction(producer, result)   # before the control record is appended (SP-61)
    log.last_stable_offset(log_end)          # SP-62: read_committed reads below it
    log.aborted_in(first, last)              # SP-63: read_committed: offsets of aborted data batches in a range
    log.start_offset                         # SP-64: the log start offset last learnt
    log.remove(first, last)                  # SP-65: whole batches removed by compaction
    log.first_present(offset)                # SP-65: the first offset at or past `offset` not removed
"""

from __future__ import annotations

from kipcheck.model.profiles import KAFKA_PROFILES, is_kafka

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
TRANSACTION_RESULTS = ("commit", "abort")


def kafka_only(what: str, profile: str) -> None:
    """SP-60: the seeds have no transactions, log start movement or compaction; under `kip` they are no trace."""
    if not is_kafka(profile):
        raise ValueError(f"{what} is defined only under the Kafka profiles ({', '.join(KAFKA_PROFILES)}) (SP-60)")


class LogFacts:
    """The transactions and removed batches of one partition's log, as far as a share-partition reads them."""

    def __init__(self, isolation_level: str = "read_uncommitted", profile: str = "kip") -> None:
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be one of {', '.join(ISOLATION_LEVELS)}, not {isolation_level!r}")
        if isolation_level == "read_committed":
            kafka_only("isolation_level read_committed", profile)
        self.profile = profile
        self.read_committed = isolation_level == "read_committed"
        self.used = self.read_committed  # any fact recorded: the fast acceptor then judges with the model's words
        self.start_offset = 0  # SP-64: the log start offset the share-partition last learnt
        self._open: dict[str, int] = {}  # producer -> first offset of its open transaction
        self._pending: dict[str, list[tuple[int, int]]] = {}  # producer -> its open transaction's data batches
        self._aborted: list[tuple[int, int]] = []  # data batches of aborted transactions, ascending
        self._removed: list[tuple[int, int]] = []  # batches removed by compaction, ascending, merged

    def append(self, first: int, count: int, producer: str | None) -> None:
        """SP-61: a data batch; a transactional one opens or extends its producer's transaction."""
        if producer is None:
            return
        kafka_only("a transactional append", self.profile)
        self.used = True
        self._open.setdefault(producer, first)
        self._pending.setdefault(producer, []).append((first, first + count - 1))

    def end_transaction(self, producer: str, result: str) -> None:
        """SP-61: the producer's control record ends its transaction; an abort marks its data batches aborted."""
        kafka_only("end_transaction", self.profile)
        if result not in TRANSACTION_RESULTS:
            raise ValueError(f"result must be one of {', '.join(TRANSACTION_RESULTS)}, not {result!r}")
        if producer not in self._open:
            raise ValueError(f"producer {producer!r} has no open transaction in this partition")
        del self._open[producer]
        batches = self._pending.pop(producer)
        if result == "abort":
            # What compaction removed is not read: there is nothing of it to archive.
            self._aborted = self._present(self._aborted + batches)

    def has_open_transaction(self, producer: str) -> bool:
        return producer in self._open

    def last_stable_offset(self, log_end: int) -> int:
        """SP-62: the first offset of the earliest open transaction, else the log end."""
        return min(self._open.values(), default=log_end)

    def aborted_in(self, first: int, last: int) -> list[tuple[int, int]]:
        """SP-63: under read_committed, the offsets within [first, last] of data batches of aborted
        transactions (that compaction has not removed), as ascending ranges."""
        if not self.read_committed:
            return []
        return [(max(first, low), min(last, high)) for low, high in self._aborted if low <= last and high >= first]

    def remove(self, first: int, last: int) -> None:
        """SP-65: compaction removed the whole batches [first, last]; an aborted batch removed is no longer read."""
        self.used = True
        merged: list[tuple[int, int]] = []
        for low, high in sorted(self._removed + [(first, last)]):
            if merged and low <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
            else:
                merged.append((low, high))
        self._removed = merged
        self._aborted = self._present(self._aborted)

    def _present(self, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """`ranges`, ascending, less the offsets compaction removed (a range given may cover part of a removed
        one: the model takes compaction's ranges as given, and keeps every offset it did not name)."""
        present = []
        for low, high in sorted(ranges):
            for first, last in self._removed:
                if first <= high and last >= low:
                    if low < first:
                        present.append((low, first - 1))
                    low = last + 1
            if low <= high:
                present.append((low, high))
        return present

    def is_removed(self, offset: int) -> bool:
        """SP-65: compaction removed the batch holding `offset`."""
        return any(first <= offset <= last for first, last in self._removed)

    def first_present(self, offset: int) -> int:
        """SP-65: the first offset at or past `offset` that compaction did not remove."""
        for first, last in self._removed:
            if first <= offset <= last:
                return last + 1
        return offset
