"""kill -9 of the broker in the middle of any write of an individual commit loses no commit and resurrects none.

The broker runs under tests/harness.py's crashing disk: it kills itself with SIGKILL in the middle of its N-th
write to the primary offsets log (`offsets.log`) or to the IC log (`_individual_commit_offsets.log`), after a
seeded random part of it. A kio consumer commits offsets one commit at a time (gaps, then the offsets that fill
them, so commits both put ranges and move the stable offset) until the broker dies. After a restart every
commit answered NONE is committed, nothing never asked for is, and the coordinator's ic trace, whose `replay`
step is judged against every commit before the crash, is allowed (IC-4, IC-12).
"""

from __future__ import annotations

import random
import signal
import sys
from pathlib import Path

import pytest

from kipcheck.impl.consumer import KafkaError
from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker
from kipcheck.oracle.conformance.scenarios.ic import TP, key_range_consumer, prepare

pytestmark = pytest.mark.slow

HARNESS_LAUNCHER = (sys.executable, str(Path(__file__).parent / "harness.py"), "broker")


def committed_offsets(bootstrap: str) -> set[int]:
    reader = key_range_consumer(bootstrap)
    try:
        stable = reader._offsets.committed([TP])[TP] - 1
        return set(range(stable + 1)) | {offset for first, last in reader._offsets.committed_ranges[TP]
                                         for offset in range(first, last + 1)}
    finally:
        reader.close()


@pytest.mark.parametrize("path_part, crash_at", [
    ("offsets.log", random.Random(12).randrange(2, 30)),
    ("_individual_commit_offsets", random.Random(19).randrange(2, 30)),
])
def test_kill_9_in_the_middle_of_a_commit_write_loses_no_commit(path_part, crash_at, tmp_path, monkeypatch):
    broker = EmbeddedBroker(tmp_path)
    broker.start()
    prepare(broker, 10)
    broker.stop()
    monkeypatch.setenv("KIPCHECK_CRASH_AT_WRITE", f"{crash_at},{crash_at},{path_part}")
    broker.launcher = HARNESS_LAUNCHER
    broker.start()
    consumer = key_range_consumer(broker.bootstrap, **{"default.api.timeout.ms": 2000})
    consumer.assign({TP: []})
    asked, answered = set(), set()
    order = [offset for block in range(0, 400, 8) for offset in (block + 1, block + 3, block + 5, block + 7)] + \
            [offset for block in range(0, 400, 8) for offset in (block, block + 2, block + 4, block + 6)]
    try:
        for offset in order:
            asked.add(offset)
            consumer.commit_ranges({TP: [(offset, offset)]})
            answered.add(offset)
    except KafkaError:
        pass                                  # the broker died during this commit
    finally:
        consumer.close()
    assert broker.process.wait(30) == -signal.SIGKILL, broker.log_tail()
    monkeypatch.delenv("KIPCHECK_CRASH_AT_WRITE")
    broker.launcher = DEFAULT_LAUNCHER
    broker.start()
    try:
        committed = committed_offsets(broker.bootstrap)
    finally:
        broker.stop()
    assert answered, "the broker crashed before any commit was answered"
    assert answered <= committed, f"answered commits lost: {sorted(answered - committed)[:10]}"
    assert committed <= asked, f"offsets committed that no one asked for: {sorted(committed - asked)[:10]}"
    for path in sorted(broker.trace_dir.glob("ic.*.jsonl")):
        verdict = check_file(path)
        assert verdict, verdict.summary()
