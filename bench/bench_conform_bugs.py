"""The power of `kipcheck conform`, measured: seeded broker bugs caught from the outside, and false alarms.

    .venv/bin/python bench/bench_conform_bugs.py                 # every bug, then 20 runs against the clean broker
    .venv/bin/python bench/bench_conform_bugs.py --bug foreign-ack --clean-runs 0

For each bug of tests/broker_bugs.py the reference broker is started with the bug
patched in (a test-only launcher), and `kipcheck conform --target wire://...`
probes it with its default budget, stopping at the first failure: the bug is
caught when conform exits 1. A bug the wire target cannot reach (it shows only
after a broker restart, which the runner cannot cause on a broker it did not
start) is tried next with `--target embedded --launcher ...`, where the runner
restarts the broker itself. Then the clean broker is probed `--clean-runs` times
over the wire with the full budget: every failure there is a false alarm.
Prints one line per bug (caught by which target, seconds to the catch, the
clause), the kill rate and the false-alarm count.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from broker_bugs import BUGS, launcher  # noqa: E402

from kipcheck.oracle.conformance.probes.catalogue import CATALOGUE  # noqa: E402
from kipcheck.oracle.conformance.targets import BrokerSettings  # noqa: E402
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker, embedded_settings  # noqa: E402

FAILED_CLAUSE = re.compile(r"^\s+FAILED\s+((?:SP|SS|ST|XM)-\d+)\s", re.MULTILINE)
RUN_TIMEOUT_S = 900


def conform(arguments: list[str], work_dir: Path) -> tuple[int, float, str]:
    """(exit code, seconds, failed clauses) of one `kipcheck conform` run."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "kipcheck", "conform", "--work-dir", str(work_dir), *arguments],
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=ROOT)
    return result.returncode, time.monotonic() - started, ",".join(sorted(set(FAILED_CLAUSE.findall(result.stdout))))


def over_wire(broker_launcher: tuple[str, ...], work_dir: Path, extra: list[str]) -> tuple[int, float, str]:
    profile = "kafka-4.2"
    broker_settings = embedded_settings(profile)
    settings = [argument for name, value in broker_settings.items() if name in BrokerSettings.NAMES
                for argument in ("--set", f"{name}={value}")]
    with EmbeddedBroker(work_dir / "broker", broker_settings, profile=profile, launcher=broker_launcher,
                        traced=False) as broker:
        return conform(["--target", f"wire://{broker.bootstrap}", "--profile", profile, *settings, *extra],
                       work_dir / "conform")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bug", action="append", choices=sorted(BUGS), help="only this bug (repeatable)")
    parser.add_argument("--clean-runs", type=int, default=20, help="probes of the clean broker (default 20)")
    args = parser.parse_args()
    names = args.bug or list(BUGS)
    caught = 0
    print(f"{'bug':<46} {'caught by':<10} {'seconds':>8}  clauses", flush=True)
    with tempfile.TemporaryDirectory(prefix="kipcheck-bench-bugs-") as temporary:
        work = Path(temporary)
        for index, name in enumerate(names):
            code, seconds, clauses = over_wire(launcher(name), work / f"wire-{index}", ["--first-failure"])
            target = "wire"
            if not (code == 1 and clauses):  # a catch names the clause; a crash of the patched broker is no catch
                probes = [argument for scenario in [*CATALOGUE, "swarm"] for argument in ("--scenario", scenario)]
                code, seconds, clauses = conform(["--launcher", " ".join(launcher(name)), "--first-failure", *probes],
                                                 work / f"embedded-{index}")
                target = "embedded"
            hit = code == 1 and bool(clauses)
            caught += hit
            print(f"{name:<46} {target if hit else 'MISSED':<10} {seconds:>8.1f}  {clauses}", flush=True)
        alarms = []
        for run in range(args.clean_runs):
            code, seconds, clauses = over_wire(DEFAULT_LAUNCHER, work / f"clean-{run}", [])
            if code != 0:
                alarms.append(f"run {run + 1}: exit {code} {clauses}")
            print(f"clean broker, run {run + 1:>2}: exit {code} ({seconds:.0f} s) {clauses}", flush=True)
    print(f"\nkill rate: {caught} of {len(names)} seeded bugs caught; false alarms: {len(alarms)} of {args.clean_runs} "
          f"clean runs" + "".join(f"\n  {alarm}" for alarm in alarms))
    return 0 if caught == len(names) and not alarms else 1


if __name__ == "__main__":
    raise SystemExit(main())
