"""The power of `kipcheck conform`, measured: seeded broker bugs caught from the outside, and false alarms.

    .venv/bin/python bench/bench_conform_bugs.py                 # every bug, then 20 clean runs, with and without --set
    .venv/bin/python bench/bench_conform_bugs.py --bug foreign-ack --clean-runs 0 --settings described

For each bug of tests/broker_bugs.py the reference broker is started with the bug
patched in (a test-only launcher), and `kipcheck conform --target wire://...`
probes it with its default budget, stopping at the first failure: the bug is
caught when conform exits 1 naming a clause. It is probed twice: once told the
broker's share settings with --set, once told nothing (the runner reads them
from the broker: DescribeConfigs, and the lock duration of every ShareFetch
answer). A bug the wire target cannot reach (it shows only after a broker
restart, which the runner cannot cause on a broker it did not start) is tried
next with `--target embedded --launcher ...`, where the runner restarts the
broker itself. Then the clean broker is probed `--clean-runs` times over the
wire with the full budget, in each way: every failure there is a false alarm.
Prints one line per bug (for each way: caught by which target, seconds to the
catch, the clauses), the kill rate and the false-alarm count of each way.
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


def over_wire(broker_launcher: tuple[str, ...], work_dir: Path, extra: list[str], told: bool) -> tuple[int, float, str]:
    """conform over the wire against the reference broker started by `broker_launcher`; `told`: with --set."""
    profile = "kafka-4.2"
    broker_settings = embedded_settings(profile)
    settings = [argument for name, value in broker_settings.items() if told and name in BrokerSettings.NAMES
                for argument in ("--set", f"{name}={value}")]
    with EmbeddedBroker(work_dir / "broker", broker_settings, profile=profile, launcher=broker_launcher,
                        traced=False) as broker:
        return conform(["--target", f"wire://{broker.bootstrap}", "--profile", profile, *settings, *extra],
                       work_dir / "conform")


def catch(name: str, work: Path, told: bool) -> tuple[bool, str]:
    """Whether `name` is caught (over the wire, else by the embedded target), and its line's cell."""
    code, seconds, clauses = over_wire(launcher(name), work / "wire", ["--first-failure"], told)
    target = "wire"
    if not (code == 1 and clauses):  # a catch names the clause; a crash of the patched broker is no catch
        probes = [argument for scenario in [*CATALOGUE, "swarm"] for argument in ("--scenario", scenario)]
        code, seconds, clauses = conform(["--launcher", " ".join(launcher(name)), "--first-failure", *probes],
                                         work / "embedded")
        target = "embedded"
    hit = code == 1 and bool(clauses)
    return hit, f"{target if hit else 'MISSED':<9} {seconds:>6.1f} {clauses:<14}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bug", action="append", choices=sorted(BUGS), help="only this bug (repeatable)")
    parser.add_argument("--clean-runs", type=int, default=20, help="probes of the clean broker, each way (default 20)")
    parser.add_argument("--settings", choices=("both", "given", "described"), default="both",
                        help="probe told the settings with --set (given), told nothing (described), or both ways")
    args = parser.parse_args()
    names = args.bug or list(BUGS)
    ways = {"given": [True], "described": [False], "both": [True, False]}[args.settings]
    caught = {told: 0 for told in ways}
    heads = "  ".join(f"{'with --set' if told else 'without --set':<31}" for told in ways)
    print(f"{'bug':<46} {heads}\n{'':<46} " + "  ".join(f"{'caught by':<9} {'s':>6} {'clauses':<14}" for _ in ways),
          flush=True)
    with tempfile.TemporaryDirectory(prefix="kipcheck-bench-bugs-") as temporary:
        work = Path(temporary)
        for index, name in enumerate(names):
            cells = []
            for told in ways:
                hit, cell = catch(name, work / f"{index}-{told}", told)
                caught[told] += hit
                cells.append(cell)
            print(f"{name:<46} " + "  ".join(cells), flush=True)
        alarms: dict[bool, list[str]] = {told: [] for told in ways}
        for run in range(args.clean_runs):
            for told in ways:
                code, seconds, clauses = over_wire(DEFAULT_LAUNCHER, work / f"clean-{run}-{told}", [], told)
                if code != 0:
                    alarms[told].append(f"run {run + 1}: exit {code} {clauses}")
                print(f"clean broker, run {run + 1:>2}, {'with' if told else 'without'} --set: exit {code} "
                      f"({seconds:.0f} s) {clauses}", flush=True)
    for told in ways:
        print(f"\n{'with' if told else 'without'} --set: kill rate {caught[told]} of {len(names)} seeded bugs caught; "
              f"false alarms: {len(alarms[told])} of {args.clean_runs} clean runs"
              + "".join(f"\n  {alarm}" for alarm in alarms[told]))
    return 0 if all(caught[told] == len(names) and not alarms[told] for told in ways) else 1


if __name__ == "__main__":
    raise SystemExit(main())
