"""End to end: streaming queries in their own process, killed -9 mid-batch (the whole driver: JVM, Python
workers and the source process), then restarted, or replaced by another query of the same share group.

Nothing may be lost; a record may be processed twice only as spec/spark-connectors.md allows: the
same batch re-run (same rows), or, for kipcheck-share, a redelivery with a higher delivery count of a
record the group never saw accepted (the judged traces show which). The seeded bug (accepting a
batch before Spark committed it) must be caught.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
from spark_support import RANGE_FETCH, assert_traces_pass, fresh_topic, serves_offset_commit

JOB = Path(__file__).resolve().parent / "spark_job.py"
RECORDS = 80
WAIT_S = 240


class Job:
    """One run of tests/spark_job.py in its own process group."""

    def __init__(self, broker, connector, topic, group, work: Path, bug: str | None = None) -> None:
        self.work = work
        command = [sys.executable, str(JOB), "--connector", connector, "--bootstrap", broker.bootstrap,
                   "--topic", topic, "--group", group, "--work", str(work)] + (["--bug", bug] if bug else [])
        (work / "stop").unlink(missing_ok=True)
        self.log = open(work / f"job-{time.monotonic_ns()}.log", "wb")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_for(self, condition, what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not condition():
            if self.process.poll() is not None:
                raise AssertionError(f"the job exited ({self.process.returncode}) before {what}:\n{self.log_text()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"no {what} within {WAIT_S} s:\n{self.log_text()}")
            time.sleep(0.2)

    def kill(self) -> None:
        """kill -9 of the driver's whole process group."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()

    def stop(self) -> None:
        (self.work / "stop").touch()
        try:
            self.process.wait(WAIT_S)
        finally:
            self.kill()

    def log_text(self) -> str:
        self.log.flush()
        return "".join(path.read_text(errors="replace")[-3000:] for path in self.work.glob("job-*.log"))


def outputs(*works: Path) -> dict[str, list]:
    """Every written batch attempt: name -> rows [partition, offset, deliveryCount]."""
    return {f"{work.name}/{path.name}": json.loads(path.read_text())
            for work in works for path in sorted((work / "out").glob("batch-*.json"))}


def records_seen(*works: Path) -> set:
    return {(row[0], row[1]) for rows in outputs(*works).values() for row in rows}


def every_record() -> set:
    return {(0, offset) for offset in range(RECORDS)}


def run_killed_mid_batch(broker, connector, topic, group, work: Path, bug: str | None = None) -> Job:
    work.mkdir(parents=True, exist_ok=True)
    job = Job(broker, connector, topic, group, work, bug)
    job.wait_for(lambda: (work / "started-2").exists(), "third micro-batch")
    job.kill()  # batch 2 is being written: its rows are not in out/
    return job


def assert_duplicates_allowed(works: list[Path], share: bool) -> None:
    deliveries: dict[tuple, set] = {}
    attempts: dict[str, list] = {}
    for name, rows in outputs(*works).items():
        batch = name.split("/")[0] + "/" + name.split(".")[0].split("/")[-1]
        attempts.setdefault(batch, []).append(sorted(map(tuple, rows)))
        for partition, offset, count in rows:
            deliveries.setdefault((partition, offset), set()).add((batch, count))
    for record, seen in deliveries.items():
        batches = {batch for batch, _ in seen}
        if len(batches) > 1:
            assert share, f"{record} was read by micro-batches {sorted(batches)}: read again after its commit"
            counts = sorted(count for _, count in seen)
            assert len(set(counts)) == len(counts), f"{record} processed twice in one delivery: {sorted(seen)}"
    for batch, rows in attempts.items():
        assert all(attempt == rows[0] for attempt in rows), f"{batch} re-ran with other rows"


def staged_rows(work: Path, batch: int) -> set:
    """The records of a share query's staged micro-batch (what it was processing when killed)."""
    table = pa.ipc.open_file(str(work / "staging" / f"batch-{batch}.arrow")).read_all()
    return set(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist()))


def test_share_query_killed_mid_batch_loses_nothing(spark_broker, tmp_path):
    """Query A dies mid-batch; query B of the same group gets what A had not committed; A restarted
    from its checkpoint re-runs its unfinished batch from the staging store."""
    topic = fresh_topic(spark_broker, records=RECORDS)
    killed, successor_work = tmp_path / "a", tmp_path / "b"
    run_killed_mid_batch(spark_broker, "share", topic, "killed", killed)
    in_flight = staged_rows(killed, 2)
    assert in_flight and not in_flight & records_seen(killed)
    successor_work.mkdir()
    successor = Job(spark_broker, "share", topic, "killed", successor_work)
    successor.wait_for(lambda: records_seen(killed, successor_work) >= every_record(), "output of every record")
    successor.stop()
    restarted = Job(spark_broker, "share", topic, "killed", killed)
    restarted.wait_for(lambda: records_seen(killed) >= in_flight, "the re-run of the killed batch")
    restarted.stop()
    assert records_seen(killed, successor_work) == every_record()
    assert_duplicates_allowed([killed, successor_work], share=True)
    assert_traces_pass(killed / "traces")


def test_seeded_bug_accept_before_commit_is_caught(spark_broker, tmp_path):
    """The same story with a connector that accepts a batch once staged: the batch A died in is lost."""
    topic = fresh_topic(spark_broker, records=RECORDS)
    killed, successor_work = tmp_path / "a", tmp_path / "b"
    run_killed_mid_batch(spark_broker, "share", topic, "buggy", killed, bug="accept-before-commit")
    in_flight = staged_rows(killed, 2)
    successor_work.mkdir()
    successor = Job(spark_broker, "share", topic, "buggy", successor_work)
    successor.wait_for(lambda: records_seen(killed, successor_work) >= every_record() - in_flight,
                       "output of every record the buggy query had not taken")
    time.sleep(2)  # ten more triggers of B: a redelivery would have come by now
    successor.stop()
    lost = every_record() - records_seen(killed, successor_work)
    assert lost == in_flight, "the seeded bug (accept before commit) was not caught"


def test_keyrange_query_killed_mid_batch_loses_nothing(spark_broker, tmp_path):
    topic = fresh_topic(spark_broker, records=RECORDS, configs=RANGE_FETCH)
    work = tmp_path / "query"
    run_killed_mid_batch(spark_broker, "keyrange", topic, "keyrange-killed", work)
    restarted = Job(spark_broker, "keyrange", topic, "keyrange-killed", work)
    restarted.wait_for(lambda: records_seen(work) >= every_record(), "output of every record")
    restarted.stop()
    assert records_seen(work) == every_record()
    assert_duplicates_allowed([work], share=False)
    if serves_offset_commit(spark_broker):  # the group's commits, traced (consumer groups in the broker)
        assert_traces_pass(work / "traces")
