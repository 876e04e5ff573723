"""How fast does `kipcheck check` judge share-partition traces, next to parsing alone?

Generates a realistic share-partition trace (a producer appending batches,
several consumers acquiring, acknowledging with every type, some stalling
until their locks expire, leaving and rejoining, a check now and then) into a
temporary file, then times in one run:

  (a) parsing every line with msgspec (untyped) alone, and
  (b) kipcheck.oracle.check.check_file on the same file,

and prints steps/s (CPU time, best of --repeat runs) for both and their
ratio; with --reference also (c) check_file(path, reference=True), the
plain model instead of the fast acceptor (`kipcheck check --reference`);
then the checker's memory peak
(tracemalloc) on a tenth of the trace and on all of it: a flat checker has
the same peak for both.

    .venv/bin/python bench/bench_check.py                 # 1,000,000 steps, kip
    .venv/bin/python bench/bench_check.py --steps 200000 --profile kafka-4.2 --seed 7
    .venv/bin/python bench/bench_check.py --steps 300000 --no-memory --reference

The trace is drawn from the fast acceptor (the lowest allowed acquisition and
its answer to each acknowledgement; it gives the model's answers and
generates large traces quickly), so it must pass: the bench fails loudly if
the verdict is not ok. Reproduce a run with its --seed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import msgspec

from kipcheck.oracle.check import check_file, check_lines
from kipcheck.oracle.judges.fast.share_partition import SharePartition
from kipcheck.oracle.trace import FORMAT, VERSION

CONSUMERS = 6
CHECK_EVERY_STEPS = 2000
LOCK_DURATION_MS = 30000


class TraceWriter:
    """Drives the model as a broker would and writes every step it takes."""

    def __init__(self, out, profile: str, seed: int) -> None:
        self.out = out
        self.random = random.Random(seed)
        self.model = SharePartition(record_lock_duration_ms=LOCK_DURATION_MS, profile=profile)
        self.at_ms = 0
        self.steps = 0
        self.held: dict[str, list[list[int]]] = {f"consumer-{n}": [] for n in range(1, CONSUMERS + 1)}
        # A stalled consumer stops acknowledging for a while: its locks expire.
        self.stalled_until_ms: dict[str, int] = dict.fromkeys(self.held, 0)
        out.write(msgspec.json.encode({"format": FORMAT, "version": VERSION, "machine": "share-partition",
                                "profile": profile, "config": {"record_lock_duration_ms": LOCK_DURATION_MS}}) + b"\n")

    def emit(self, actor: str, op: str, args: dict | None = None, observed: dict | None = None) -> None:
        self.steps += 1
        step = {"step": self.steps, "at_ms": self.at_ms, "actor": actor, "op": op}
        if args is not None:
            step["args"] = args
        if observed is not None:
            step["observed"] = observed
        self.out.write(msgspec.json.encode(step) + b"\n")

    def one_step(self) -> None:
        self.at_ms += self.random.choice((0, 1, 2, 5, 10, 20))
        self.model.advance(self.at_ms)
        roll = self.random.random()
        actor = self.random.choice(list(self.held))
        if self.steps % CHECK_EVERY_STEPS == CHECK_EVERY_STEPS - 1:
            self.check()
        elif roll < 0.001:
            self.emit(actor, "leave")
            self.model.leave(self.at_ms, actor)
            self.held[actor].clear()
        elif roll < 0.00105:
            self.stalled_until_ms[actor] = self.at_ms + LOCK_DURATION_MS + 1000
            self.emit("clock", "tick")
        elif roll < 0.15 or self.model.log_end_offset - self.model.speo < 20:
            self.append()
        elif self.held[actor] and self.stalled_until_ms[actor] <= self.at_ms and roll < 0.6:
            self.acknowledge(actor)
        else:
            self.acquire(actor)

    def append(self) -> None:
        count = self.random.randint(1, 20)
        self.emit("producer", "append", {"count": count})
        self.model.append(count)

    def acquire(self, actor: str) -> None:
        max_records = self.random.choice((1, 5, 10, 20, 50))
        records = self.model.lowest_acquisition(max_records)
        self.emit(actor, "acquire", {"max_records": max_records}, {"records": records})
        self.model.acquire(self.at_ms, actor, max_records, records)
        self.held[actor].extend(records)

    def acknowledge(self, actor: str) -> None:
        if self.random.random() < 0.01:  # a consumer acknowledging someone else's records: refused
            first, last, _ = self.held[actor][0]
            self.send_acknowledgement(self.random.choice(list(self.held)), [(first, last, "accept")])
            return
        first, last, _ = self.held[actor].pop(0)
        roll = self.random.random()
        if roll < 0.7:
            batches = [(first, last, "accept")]
        elif roll < 0.8:
            batches = [(first, last, "release")]
        elif roll < 0.85:
            batches = [(first, last, "reject")]
        elif first < last:  # a partial acknowledgement: the rest stays held
            middle = self.random.randint(first, last - 1)
            batches = [(first, middle, "accept")]
            self.held[actor].insert(0, [middle + 1, last, 0])
        else:
            batches = [(first, last, "release")]
        self.send_acknowledgement(actor, batches)

    def send_acknowledgement(self, actor: str, batches: list[tuple[int, int, str]]) -> None:
        ruled = self.model.acknowledge(self.at_ms, actor, batches)
        self.emit(actor, "acknowledge", {"batches": [{"first": f, "last": l, "type": t} for f, l, t in batches]},
                  {"error": ruled.value})

    def check(self) -> None:
        self.emit("observer", "check", None,
                  {"spso": self.model.spso, "speo": self.model.speo, "states": self.model.snapshot()})


def generate(path: Path, steps: int, profile: str, seed: int) -> None:
    with path.open("wb") as out:
        writer = TraceWriter(out, profile, seed)
        while writer.steps < steps:
            writer.one_step()


def time_parse(path: Path) -> float:
    """CPU seconds to parse every line of `path` with msgspec (untyped) alone."""
    loads = msgspec.json.decode
    started = time.process_time()
    with path.open("rb") as lines:
        for line in lines:
            loads(line)
    return time.process_time() - started


def time_check(path: Path, reference: bool = False) -> float:
    """CPU seconds for kipcheck.oracle.check.check_file(path, reference), which must pass."""
    started = time.process_time()
    verdict = check_file(path, reference)
    elapsed = time.process_time() - started
    if not verdict:
        sys.exit(f"the generated trace must pass, but: {verdict.summary()}")
    return elapsed


def peak_memory_bytes(path: Path, steps: int) -> int:
    """tracemalloc peak while checking the first `steps` steps (the header included)."""
    tracemalloc.start()
    with path.open("rb") as lines:
        verdict = check_lines(itertools.islice(lines, steps + 1), str(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if not verdict:
        sys.exit(f"the generated trace must pass, but: {verdict.summary()}")
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--profile", choices=("kip", "kafka-4.2"), default="kip")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="time parse and check this many times, keep the best")
    parser.add_argument("--no-memory", action="store_true", help="skip the (slower) tracemalloc runs")
    parser.add_argument("--reference", action="store_true",
                        help="also time check_file(reference=True): the plain model (kipcheck check --reference)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "share-partition.jsonl"
        started = time.perf_counter()
        generate(path, options.steps, options.profile, options.seed)
        print(f"generated {options.steps} steps ({path.stat().st_size / 1e6:.0f} MB, profile {options.profile}, "
              f"seed {options.seed}) in {time.perf_counter() - started:.1f} s")
        # CPU time of this process (one core), best of --repeat runs of each, interleaved:
        # the machine may be shared, and the best run is the least disturbed one.
        parse_s = check_s = reference_s = float("inf")
        for _ in range(options.repeat):
            parse_s, check_s = min(parse_s, time_parse(path)), min(check_s, time_check(path))
            if options.reference:
                reference_s = min(reference_s, time_check(path, reference=True))
        print(f"parse only (msgspec):  {options.steps / parse_s:>10,.0f} steps/s  ({parse_s:.2f} s CPU)")
        print(f"kipcheck check_file:   {options.steps / check_s:>10,.0f} steps/s  ({check_s:.2f} s CPU)")
        if options.reference:
            print(f"  --reference (model): {options.steps / reference_s:>10,.0f} steps/s  ({reference_s:.2f} s CPU)")
        print(f"ratio check/parse:     {parse_s / check_s:>10.2f}   (check takes {check_s / parse_s:.1f}x the parse time)")
        if not options.no_memory:
            tenth = peak_memory_bytes(path, options.steps // 10)
            whole = peak_memory_bytes(path, options.steps)
            print(f"memory peak (tracemalloc): {tenth / 1e6:.2f} MB for {options.steps // 10} steps, "
                  f"{whole / 1e6:.2f} MB for {options.steps} steps")
        print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
