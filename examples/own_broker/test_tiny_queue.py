"""The queue's tests: each drives a queue through the same story and has kipcheck judge its trace.

The second test's queue has a deliberate acknowledgement bug, which kipcheck.assert_conforms catches.
"""

import kipcheck

from tiny_queue import TinyQueue


def two_consumers(queue: TinyQueue) -> None:
    """c1 takes three records and acknowledges one in time and two too late; c2 then takes those two."""
    queue.append(0, count=3)
    queue.acquire(0, "c1", max_records=3)  # locked until 1000 ms
    queue.acknowledge(500, "c1", 0, 0, "accept")
    queue.acknowledge(1500, "c1", 1, 2, "accept")  # too late: REQUEST_TIMED_OUT
    queue.acquire(1600, "c2", max_records=3)
    queue.acknowledge(1700, "c2", 1, 2, "accept")
    queue.close()


def test_the_queue_conforms(trace_path):
    two_consumers(TinyQueue(trace_path, lock_ms=1000))
    kipcheck.assert_conforms(trace_path)


class LazyQueue(TinyQueue):
    """The deliberate bug: locks expire only when someone acquires, so a late acknowledgement is taken."""

    expire_before_acknowledging = False


def test_the_lazy_queue_conforms(trace_path):
    two_consumers(LazyQueue(trace_path, lock_ms=1000))
    kipcheck.assert_conforms(trace_path)
