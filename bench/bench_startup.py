"""How long do `kipcheck check` on one small file and `kipcheck broker` take to start?

CI users call `kipcheck check` once per trace, so its start-up is paid per
file. This times, in wall-clock milliseconds (median and best of --runs, each
a fresh process):

  (a) `python -c pass`, the interpreter alone, as the yardstick;
  (b) `kipcheck check FILE` on a small example trace;
  (c) `kipcheck broker --port 0` until it prints "listening on", with its peak
      resident memory (VmHWM), started in an empty working directory that is
      then listed: a broker writes nothing outside its data dir.

    .venv/bin/python bench/bench_startup.py
    .venv/bin/python bench/bench_startup.py --runs 40 --no-broker

Figures move with the machine's load (printed last); the ratio check/python
moves much less and is the number to compare between changes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KIPCHECK = (sys.executable, "-m", "kipcheck")
SMALL_TRACE = ROOT / "oracle" / "examples" / "expansion" / "seed-kip287-10-15-15-18.jsonl"
BROKER_START_TIMEOUT_S = 60


def time_command(command: list[str], runs: int) -> list[float]:
    """Wall-clock milliseconds of `runs` runs of `command`, each a fresh process."""
    elapsed = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
        elapsed.append((time.perf_counter() - start) * 1000)
    return elapsed


def time_broker(runs: int) -> tuple[list[float], list[float], list[str]]:
    """(milliseconds to "listening on", peak RSS in MiB, files left in the working directory) per run."""
    elapsed, peaks, left = [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as data_dir, tempfile.TemporaryDirectory() as work_dir:
            start = time.perf_counter()
            broker = subprocess.Popen([*KIPCHECK, "broker", "--port", "0", "--data-dir", data_dir],
                                      stdout=subprocess.PIPE, text=True, cwd=work_dir)
            try:
                line = broker.stdout.readline()
                elapsed.append((time.perf_counter() - start) * 1000)
                if not line.startswith("listening on"):
                    raise SystemExit(f"the broker did not start: {line!r}")
                peaks.append(_peak_rss_mib(broker.pid))
            finally:
                broker.terminate()
                broker.wait(BROKER_START_TIMEOUT_S)
            left += sorted(os.listdir(work_dir))
    return elapsed, peaks, left


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _line(name: str, values: list[float], unit: str = "ms") -> str:
    return f"{name:<28} median {statistics.median(values):7.1f} {unit}, best {min(values):7.1f} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument("--broker-runs", type=int, default=5, help="broker starts (default 5)")
    parser.add_argument("--no-broker", action="store_true", help="time only python and kipcheck check")
    args = parser.parse_args()
    python = time_command([sys.executable, "-c", "pass"], args.runs)
    check = time_command([*KIPCHECK, "check", str(SMALL_TRACE)], args.runs)
    print(_line("python -c pass", python))
    print(_line("kipcheck check (1 file)", check))
    print(f"{'ratio check/python':<28} {statistics.median(check) / statistics.median(python):.1f}x")
    if not args.no_broker:
        elapsed, peaks, left = time_broker(args.broker_runs)
        print(_line("kipcheck broker start", elapsed))
        print(_line("kipcheck broker peak RSS", peaks, "MiB"))
        print(f"{'files left in the cwd':<28} {', '.join(sorted(set(left))) or 'none'}")
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
