"""bench/bench_expansion.py's figures from a run's timeline and producer trace, on a small hand-made run: the
windows, the keys changing processor under linear hashing and modulo, and the modulo replay's wrong outputs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kipcheck.impl.expansion.job import JobRecord

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_expansion.py"
spec = importlib.util.spec_from_file_location("bench_expansion", BENCH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

EVENTS = [(10.0, "producing"), (14.0, "partitions -> 3"), (14.5, "partitions = 3"), (18.0, "processors -> 3"),
          (20.0, "processors = 3"), (24.0, "produced"), (25.0, "output")]


def test_the_windows_run_before_during_and_after_each_expansion():
    assert bench.windows(EVENTS) == [("before", 10.0, 14.0), ("during partitions -> 3", 14.0, 14.5),
                                     ("after partitions -> 3", 14.5, 18.0), ("during processors -> 3", 18.0, 20.0),
                                     ("after processors -> 3", 20.0, 24.0)]


def test_linear_hashing_moves_keys_only_to_new_processors_and_modulo_moves_them_anywhere():
    before, grown = JobRecord(2), JobRecord(2).with_partitions(3, lambda partition: 0)
    both = grown.with_processors(3)
    for value in range(100):
        assert bench.linear_processor(grown, value) == bench.linear_processor(before, value)
        moved = bench.linear_processor(both, value) != bench.linear_processor(grown, value)
        assert not moved or bench.linear_processor(both, value) == 2
    assert sum(bench.modulo_processor(grown, value) != bench.modulo_processor(before, value)
               for value in range(100)) > 0


def test_the_modulo_replay_counts_outputs_from_a_processor_that_missed_the_keys_earlier_records():
    stages = [JobRecord(2).with_partitions(3, lambda partition: 0)]
    appends = [{"op": "append", "at_ms": at_ms, "args": {"key_hash": value}} for at_ms, value in
               [(11_000, 4), (12_000, 4), (15_000, 4), (16_000, 4), (17_000, 6)]]
    # key 4: partition 0, processor 0 before; from 14.5 s partition 4 % 3 = 1, processor 1 % 2 = 1: counts 1, 2
    # there where the truth is 3, 4 (two wrong); key 6: partition 0, processor 0 at 17 s: right
    assert bench.modulo_replay(appends, EVENTS[:3], stages) == (2, 5)
