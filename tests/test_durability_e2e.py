"""Nothing acknowledged is lost: a real small disk filling and emptying, kill -9 at any moment, thousands of partitions.

Real confluent-kafka clients against the broker subprocess:
- a 2 MiB tmpfs data dir filled by producers while share consumers acknowledge,
  space freed, the broker killed -9 and restarted: every record the producer
  saw delivered is read back, and no record the share group acknowledged
  (commit_sync said so) is delivered again (root only: skipped, with the
  reason, where a tmpfs cannot be mounted);
- the soak (kipcheck.oracle.conformance.scenarios.soak) for a few seconds: kill -9 in a
  loop while the disk fills and empties;
- the broker killed by its own disk in the middle of its N-th write to
  topics.json, a segment, the share-state log or a trace (seeded N, a random
  part of the write done), then restarted;
- a data dir of 2,000 partitions, started under a 256-descriptor limit.
The broker's traces are not judged here: a retriable failure that changes
nothing is not a clause of the oracle yet, and a process killed mid-line
leaves a trace with a partial last line.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import harness  # tests/harness.py
import pytest
from kio.schema.errors import ErrorCode

from kipcheck.impl.broker.log import PartitionLog
from kipcheck.impl.broker.metadata import Topics
from kipcheck.impl.storage import Storage
from kipcheck.oracle.conformance.scenarios.clients import create_topic
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker
from kipcheck.oracle.conformance.scenarios.soak import (TOPIC, Deliveries, DiskUnavailable, SoakPlan, SoakProducer, SoakResult,
                                              consume_loop, fill, run_soak, small_disk, tally)

pytestmark = pytest.mark.slow

SETTINGS = SoakPlan().settings
WAIT_S = 90.0


@contextlib.contextmanager
def small_disk_or_skip(path: Path, size_bytes: int):
    try:
        with small_disk(path, size_bytes):
            yield path
    except DiskUnavailable as error:
        pytest.skip(f"no small filesystem for the data dir: {error}")


def wait_for(condition, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


class Workload:
    """A SoakProducer and share consumers on threads, until stopped."""

    def __init__(self, bootstrap: str, consumers: int = 2, value_bytes: int = 0, limit: int | None = None,
                 records_per_s: int = 2000):
        self.producer, self.deliveries, self.stop = SoakProducer(bootstrap, value_bytes), Deliveries(), threading.Event()
        self.threads = [threading.Thread(target=self.producer.run, args=(self.stop, records_per_s, limit))]
        self.threads += [threading.Thread(target=consume_loop, args=(bootstrap, self.deliveries, self.stop))
                         for _ in range(consumers)]
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(WAIT_S)
        self.producer.finish()

    def tally(self, broker: EmbeddedBroker, partitions: int) -> SoakResult:
        result = SoakResult(SoakPlan(partitions=partitions))
        tally(result, broker.bootstrap, self.producer, self.deliveries, idle_s=2.0)
        return result


def assert_nothing_lost(result: SoakResult) -> None:
    assert result.acknowledged > 0 and not result.errors, result.summary()
    assert result.lost == 0, result.summary()
    assert result.acknowledgements_lost == 0, result.summary()
    assert result.never_delivered == 0, result.summary()


def test_a_small_disk_fills_and_empties_and_nothing_acknowledged_is_lost(tmp_path):
    work = tmp_path / "work"
    with small_disk_or_skip(work / "data", 2 << 20) as data_dir:
        broker = EmbeddedBroker(work, SETTINGS)
        broker.start()
        try:
            create_topic(broker.bootstrap, TOPIC, 2)
            ballast = data_dir / "ballast"
            ballast_bytes = fill(ballast)
            with open(ballast, "r+b") as file:    # leave 512 KiB: the producer needs twice that
                file.truncate(ballast_bytes - (512 << 10))
            workload = Workload(broker.bootstrap, value_bytes=500, limit=2000)
            wait_for(lambda: " not stored: " in broker.log_path.read_text(errors="replace"), "the disk to fill")
            time.sleep(1.0)                        # hold it full while clients retry
            ballast.unlink()
            wait_for(lambda: len(workload.producer.acknowledged) == 2000, "every record to be delivered")
            workload.finish()
            broker.kill()
            broker.start()
            result = workload.tally(broker, 2)
        finally:
            broker.stop()
    assert_nothing_lost(result)
    assert result.acknowledged == result.produced == 2000


def test_soak_kill_9_in_a_loop_while_the_disk_fills_and_empties(tmp_path):
    plan = SoakPlan(duration_s=10, records_per_s=400, kill_every_s=(1.5, 3.5), disk_full_for_s=(0.5, 1.5),
                    disk_free_for_s=(1.0, 2.5), seed=11)
    with small_disk_or_skip(tmp_path / "data", 8 << 20):
        result = run_soak(tmp_path, plan)
    print(result.summary())
    assert result.ok, result.summary()
    assert result.kills >= 2 and result.disk_full_cycles >= 2 and result.storage_errors > 0


HARNESS_LAUNCHER = (sys.executable, str(Path(__file__).parent / "harness.py"), "broker")


@pytest.mark.parametrize("path_part, crash_at", [
    ("topics.json", 1),                       # while the topic is created
    ("/logs/", random.Random(932).randrange(2, 40)),             # a produced batch
    ("share-coordinator.log", random.Random(983).randrange(3, 20)),   # an acknowledgement's share state
    ("/traces/", random.Random(287).randrange(20, 200)),         # a trace line
])
def test_kill_9_in_the_middle_of_the_nth_write_loses_nothing_acknowledged(path_part, crash_at, tmp_path, monkeypatch):
    monkeypatch.setenv("KIPCHECK_CRASH_AT_WRITE", f"{crash_at},{crash_at},{path_part}")
    broker = EmbeddedBroker(tmp_path, SETTINGS, launcher=HARNESS_LAUNCHER)
    broker.start()
    try:
        with contextlib.suppress(Exception):   # the crash may come while the topic is being created
            create_topic(broker.bootstrap, TOPIC, 2, timeout_s=10)
        workload = Workload(broker.bootstrap, records_per_s=300)
        crashed = broker.process
        wait_for(lambda: crashed.poll() is not None, f"the crash at write {crash_at}")
        assert crashed.returncode == -signal.SIGKILL, broker.log_tail()
        monkeypatch.delenv("KIPCHECK_CRASH_AT_WRITE")
        broker.launcher = DEFAULT_LAUNCHER
        broker.kill()
        broker.start()
        workload.finish()
        result = workload.tally(broker, 2)
    finally:
        broker.stop()
    assert_nothing_lost(result)


def test_a_data_dir_of_thousands_of_partitions_starts_within_a_small_descriptor_limit(tmp_path, raw_client):
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is not installed")
    data_dir, storage = tmp_path / "data", Storage()
    topics = Topics(data_dir, storage)
    for name in ("a", "b"):
        topics.create(name, 1000)
        for partition in range(1000):
            log = PartitionLog.open(data_dir / "logs" / f"{name}-{partition}", storage=storage)
            log.append(harness.record_batch(1))
            log.close()
    storage.close()
    # max.connections fits the small limit beside the storage's bounded open files (the broker refuses to
    # start when its limits cannot be met: tests/test_broker_limits.py).
    broker = EmbeddedBroker(tmp_path, settings={"max.connections": "32"}, traced=False,
                            launcher=("prlimit", "--nofile=256:256", *DEFAULT_LAUNCHER))
    broker.start()
    try:
        client = raw_client(broker)
        versions = client.request(18, 3, client_software_name="t", client_software_version="1")
        assert versions.error_code == ErrorCode.none
        fetched = client.request(1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                 session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                                     {"topic": name, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                                     "fetch_offset": 0, "last_fetched_epoch": -1,
                                                                     "log_start_offset": -1,
                                                                     "partition_max_bytes": 1 << 16}
                                                                    for partition in range(0, 1000, 7)]}
                                     for name in ("a", "b")])
        answers = [part for topic in fetched.responses for part in topic.partitions]
        assert len(answers) == 2 * 143 and all(part.high_watermark == 1 and part.records for part in answers)
    finally:
        broker.stop()
