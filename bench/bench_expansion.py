"""Benchmark KIP-287 on a real broker: the seed's running-count job through its expansions (a script).

    .venv/bin/python bench/bench_expansion.py [--broker reference|kafka] [--phase-seconds 4] [--rate 300] [--kill]

One run of examples/kip287_expansion.py (10 partitions and processors, grown
to 15 partitions, 15 processors, 18 partitions while the producer writes;
its output compared with the single-threaded running count and its traces
judged, as the example does), then, from its traces, outputs and timeline:

- throughput before, during and after each expansion: records appended
  (the producer's trace) and output (the processors' output files) per
  second in each window. A partition expansion's window is the producer's
  pause (log ends read, job record written, CreatePartitions); a processor
  expansion's runs from the job record's write to the last handover (the
  last new processor assigned its last partition S1);
- state rebuilt: records each processor replayed without output (`rebuild`
  steps) and their bytes (key and value, read back from the topic), the new
  processors' and the first ten's apart (state is never copied: a new
  processor reads it from the log; the first ten should rebuild nothing and
  never take a partition from one another);
- catch-up time of each new processor (each incarnation): from its first
  step to `ready`, and to its last partition handed over;
- the contrast, a modulo partitioner (key hash mod partitions, partition mod
  processors): the keys whose processor changes at each expansion, under
  linear hashing and under modulo, counted over the run's keys; and the wrong
  outputs of the same job routed by modulo, found by replaying the run's
  records in the order they were produced through processors that keep local
  state (a replay, not a second run on the broker: a KIP-287 processor
  refuses a record routed by modulo, tests/test_expansion_end_to_end.py).

Figures move with the machine's load; the last line prints it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

from kipcheck.impl.expansion import assignor
from kipcheck.impl.expansion.job import JobRecord
from kipcheck.model.expansion import linear_hash

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "kip287_expansion.py"


def load_example():
    spec = importlib.util.spec_from_file_location("kip287_expansion", EXAMPLE)
    sys.modules[spec.name] = module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def steps(path: Path) -> list[dict]:
    lines = path.read_text().splitlines()[1:]
    return [json.loads(line) for line in lines if line.strip()]


def windows(events: list[tuple[float, str]]) -> list[tuple[str, float, float]]:
    """(name, start, end): before the first expansion, during each, after each until the next."""
    marks, result = dict((name, at) for at, name in events), []
    begins = [(at, name) for at, name in events if "->" in name]
    result.append(("before", marks["producing"], begins[0][0]))
    for number, (begin, name) in enumerate(begins):
        done = marks[name.replace("->", "=")]
        after_end = begins[number + 1][0] if number + 1 < len(begins) else marks["produced"]
        result += [(f"during {name}", begin, done), (f"after {name}", done, after_end)]
    return result


def throughput(outcome, record: JobRecord) -> None:
    traces = outcome.job.work / "traces"
    appended = [step["at_ms"] / 1000 for step in steps(traces / "expansion.producer.jsonl") if step["op"] == "append"]
    output = [line[4] for line in (json.loads(text) for path in (outcome.job.work / "outputs").glob("*.jsonl")
                                   for text in path.read_text().splitlines())]
    print("throughput (records/s)            window_s  appended   output")
    for name, start, end in windows(outcome.job.events):
        length = max(end - start, 1e-3)
        rate = [sum(start <= at < end for at in times) / length for times in (appended, output)]
        print(f"  {name:<30} {length:9.2f} {rate[0]:9.0f} {rate[1]:8.0f}")


def rebuilt(outcome, record: JobRecord) -> None:
    sizes = {(partition, offset): len(key) + len(str(sequence)) for partition, offset, key, sequence in outcome.records}
    records, size, keys = Counter(), Counter(), defaultdict(set)
    assigns = []
    for path in sorted((outcome.job.work / "traces").glob("expansion.processor-*.jsonl")):
        for step in steps(path):
            args = step["args"]
            if step["op"] == "rebuild":
                group = "new" if args["processor"] >= record.initial else "first"
                records[group] += 1
                size[group] += sizes[args["partition"], args["offset"]]
                keys[group].add(args["key_hash"])
            elif step["op"] == "assign":
                assigns.append((step["at_ms"], args["partition"], args["processor"]))
    holders, moved_between_first = {}, 0
    for _, partition, processor in sorted(assigns):  # every processor's assignments, in time order
        before = holders.get(partition, processor)
        moved_between_first += before != processor and before < record.initial and processor < record.initial
        holders[partition] = processor
    print("state rebuilt from the log (never copied)   records    bytes  keys")
    for group, label in (("new", "new processors (10..14)"), ("first", "first ten, from one another")):
        print(f"  {label:<40} {records[group]:8} {size[group]:8} {len(keys[group]):5}")
    print(f"  partitions moved between the first ten: {moved_between_first}")


def catch_up(outcome, record: JobRecord) -> None:
    """Each new processor's incarnation: its first step after the expansion began (its process starting), then
    `ready` and its last partition S1 assigned after that first step, in seconds."""
    began = next(at for at, name in outcome.job.events if name.startswith("processors ->"))
    print("catch-up of the new processors (s)   started  ready  handed over")
    for processor in range(record.initial, record.processors):
        for path in sorted((outcome.job.work / "traces").glob(f"expansion.processor-{processor}.*jsonl")):
            trace = steps(path)
            first = trace[0]["at_ms"] / 1000
            ready = next((step["at_ms"] / 1000 for step in trace if step["op"] == "ready"), None)
            handed = max((step["at_ms"] / 1000 for step in trace if step["op"] == "assign"
                          and step["args"]["partition"] in record.takeover(processor)), default=None)
            seconds = ["-" if at is None else f"{at - first:.2f}" for at in (ready, handed)]
            print(f"  {path.name:<34} {first - began:8.2f} {seconds[0]:>6} {seconds[1]:>12}")


def contrast(outcome, record: JobRecord) -> None:
    """Keys changing processor at each expansion, linear hashing versus modulo; wrong outputs under modulo."""
    producer = steps(outcome.job.work / "traces" / "expansion.producer.jsonl")
    hashes = sorted({step["args"]["key_hash"] for step in producer if step["op"] == "append"})
    stages, job = [], JobRecord(record.initial)
    for expansion in record.expansions:
        job = JobRecord(record.initial, (*job.expansions, expansion))
        stages.append(job)
    print(f"keys changing processor ({len(hashes)} keys)     linear hashing  (to a new one)   modulo")
    previous = JobRecord(record.initial)
    for job in stages:
        linear = [(linear_processor(previous, value), linear_processor(job, value)) for value in hashes]
        modulo = [(modulo_processor(previous, value), modulo_processor(job, value)) for value in hashes]
        kind = "partitions" if job.partitions != previous.partitions else "processors"
        moved = [after for before, after in linear if before != after]
        print(f"  {kind + ' -> ' + str(job.expansions[-1].count):<36} {len(moved):14} "
              f"{sum(after >= previous.processors for after in moved):15} {sum(a != b for a, b in modulo):8}")
        previous = job
    wrong, total = modulo_replay(producer, outcome.job.events, stages)
    print(f"the same job routed by modulo, replayed: {wrong} of {total} outputs wrong ({100 * wrong / total:.1f} %)")


def linear_processor(job: JobRecord, value: int) -> int:
    return assignor.target(job, linear_hash(value, job.partitions, job.initial))


def modulo_processor(job: JobRecord, value: int) -> int:
    return value % job.partitions % job.processors


def modulo_replay(producer: list[dict], events: list[tuple[float, str]], stages: list[JobRecord]) -> tuple[int, int]:
    """The producer's appends in order, each counted by the processor that modulo routing with the counts of the
    time sends it to, from that processor's own state (it never saw the key's records routed elsewhere)."""
    done = [at for at, name in events if "=" in name]  # when each expansion took effect
    state, sequence, wrong, total = defaultdict(Counter), Counter(), 0, 0
    for step in (step for step in producer if step["op"] == "append"):
        stage = sum(at <= step["at_ms"] / 1000 for at in done)
        job = stages[stage - 1] if stage else JobRecord(stages[0].initial)
        value = step["args"]["key_hash"]
        sequence[value] += 1
        processor = modulo_processor(job, value)
        state[processor][value] += 1
        wrong += state[processor][value] != sequence[value]
        total += 1
    return wrong, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker", choices=["reference", "kafka"], default="reference")
    parser.add_argument("--phase-seconds", type=float, default=4.0)
    parser.add_argument("--rate", type=int, default=300)
    parser.add_argument("--kill", action="store_true", help="kill -9 a new processor while it catches up")
    args = parser.parse_args(argv)
    example = load_example()
    outcome = example.execute(example.parse(
        ["--broker", args.broker, "--phase-seconds", str(args.phase_seconds), "--rate", str(args.rate),
         *(["--kill"] if args.kill else [])]))
    record = outcome.record
    print(f"{args.broker} broker, {outcome.protocol} protocol, {args.rate} records/s offered, "
          f"{args.phase_seconds:g} s phases, killed during catch-up: {outcome.killed or 'none'}")
    print(f"output equals the reference: {not outcome.problems}; traces judged ok: "
          f"{sum(map(bool, outcome.verdicts.values()))} of {len(outcome.verdicts)}")
    throughput(outcome, record)
    rebuilt(outcome, record)
    catch_up(outcome, record)
    contrast(outcome, record)
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; work dir: {outcome.job.work.parent}")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
