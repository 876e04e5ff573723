"""How long do `kipcheck check` on one small file and `kipcheck broker` take to start?

CI users call `kipcheck check` once per trace, so its start-up is paid per
file. This times, in wall-clock and in CPU milliseconds (user + system of the
child; median and best of --runs, each a fresh process):

  (a) `python -c pass`, the interpreter alone, as the yardstick;
  (b) `python -c "import msgspec"`, the JSON library the checker reads traces
      with: a floor no checker built on it can go below;
  (c) `kipcheck check FILE` on a small share-partition trace and on a small
      share-session trace;
  (d) `kipcheck broker --port 0` until it prints "listening on", with its peak
      resident memory (VmHWM), started in an empty working directory that is
      then listed: a broker writes nothing outside its data dir.

    .venv/bin/python bench/bench_startup.py
    .venv/bin/python bench/bench_startup.py --runs 40 --no-broker [--no-bytecode-cache]

Each command runs as an installed kipcheck runs: with compiled bytecode (a
private PYTHONPYCACHEPREFIX, filled by one untimed run of each command first;
pip compiles an installed package's modules the same way).
--no-bytecode-cache instead runs every command with PYTHONDONTWRITEBYTECODE=1
and no cache for kipcheck's own modules, as a source checkout without
__pycache__ does: each run compiles them again.
Wall-clock figures move with the machine's load (printed last); CPU time and
the ratios to python move much less and are the numbers to compare between changes.
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
SMALL_TRACES = {"share-partition": ROOT / "oracle" / "examples" / "share-partition" / "kip-lock-expiry.jsonl",
                "share-session": ROOT / "oracle" / "examples" / "share-session" / "seed-session-table.jsonl"}
BROKER_START_TIMEOUT_S = 60


def child_environment(bytecode_cache: str | None) -> dict[str, str]:
    """The environment of the timed commands: compiled bytecode in `bytecode_cache`, or none (None)."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if bytecode_cache is None:
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        environment["PYTHONPYCACHEPREFIX"] = bytecode_cache
    return environment


def time_command(command: list[str], runs: int, environment: dict[str, str]) -> tuple[list[float], list[float]]:
    """(wall-clock, CPU) milliseconds of `runs` runs of `command`, each a fresh process, after one untimed run."""
    subprocess.run(command, stdout=subprocess.DEVNULL, env=environment, check=True)
    wall, cpu = [], []
    for _ in range(runs):
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=environment)
        _, status, usage = os.wait4(child.pid, 0)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((usage.ru_utime + usage.ru_stime) * 1000)
        if status != 0:
            raise SystemExit(f"{' '.join(command)} failed (wait status {status})")
    return wall, cpu


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
    return f"{name:<34} median {statistics.median(values):7.1f} {unit}, best {min(values):7.1f} {unit}"


def _figures(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} {min(values):7.1f}"


def print_startups(runs: int, environment: dict[str, str]) -> None:
    python = time_command([sys.executable, "-c", "pass"], runs, environment)
    print(f"{'milliseconds':34} {'wall: median    best':>20}  {'CPU: median    best':>20}   ratios to python (medians)")
    timed = [("python -c pass", python),
             ("python -c 'import msgspec'", time_command([sys.executable, "-c", "import msgspec"], runs, environment))]
    timed += [(f"kipcheck check ({machine})", time_command([*KIPCHECK, "check", str(path)], runs, environment))
              for machine, path in SMALL_TRACES.items()]
    for name, (wall, cpu) in timed:
        ratios = (f"{statistics.median(wall) / statistics.median(python[0]):.2f}x wall, "
                  f"{statistics.median(cpu) / statistics.median(python[1]):.2f}x CPU")
        print(f"{name:34} {_figures(wall):>20}  {_figures(cpu):>20}   {ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument("--broker-runs", type=int, default=5, help="broker starts (default 5)")
    parser.add_argument("--no-broker", action="store_true", help="time only python and kipcheck check")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="compile kipcheck's modules in every run (PYTHONDONTWRITEBYTECODE=1), as a source "
                             "checkout without __pycache__ does")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as bytecode_cache:
        print_startups(args.runs, child_environment(None if args.no_bytecode_cache else bytecode_cache))
    if not args.no_broker:
        elapsed, peaks, left = time_broker(args.broker_runs)
        print(_line("kipcheck broker start", elapsed))
        print(_line("kipcheck broker peak RSS", peaks, "MiB"))
        print(f"{'files left in the cwd':<34} {', '.join(sorted(set(left))) or 'none'}")
    cache = "none for kipcheck's modules" if args.no_bytecode_cache else "compiled"
    print(f"python {sys.version.split()[0]}, bytecode {cache}, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
