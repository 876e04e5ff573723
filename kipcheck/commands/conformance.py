"""kipcheck conformance: the main job, with a readable verdict."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from kipcheck.oracle.examples import examples

DESCRIPTION = """\
Run the conformance suite. It judges every bundled example trace (one folder
per machine; traces under violations/ must be caught at the clause their name
ends with) and prints one line per trace and a verdict.

Then (unless --machine or --no-broker is given) it runs the broker scenarios:
the reference broker is started on a free loopback port, real confluent-kafka
clients produce and consume through share groups (compressed and idempotent
producers, implicit and explicit acknowledgement, a consumer and the broker
killed -9) and through consumer groups (classic range, roundrobin and
cooperative-sticky, KIP-848 uniform and range, as members leave, join and are
killed -9; committed offsets across a broker kill -9; KIP-983 consumers beside
confluent-kafka ones, as members join, leave and are fenced while they delay a
revoke), Kafka 4.2's share-group additions through kio's ShareFetch and
ShareAcknowledge v2 (RENEW, record_limit, throttled redelivery,
acknowledgements around SPSO, a group emptied by its last connection), and
individual commit (kio consumers sharing one partition by key range, handing
a range over, the broker killed -9 between range commits, and the KIP-848
coordinator's key-range assignor splitting a partition as consumers join and
leave); every trace the
broker and the kio consumers wrote is judged. A scenario passes when the
clients saw what the protocol promises and every trace is allowed.

exit status: 0 every check behaved as expected, 1 otherwise."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--machine", help="only this machine's traces (and no broker scenarios)")
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per example trace, not per machine")
    parser.add_argument("--no-broker", action="store_true", help="skip the broker scenarios")
    parser.add_argument("--scenario", action="append", metavar="NAME", help="run only this broker scenario (repeatable)")
    parser.add_argument("--broker-profile", choices=("kafka-4.2", "kip", "both"), default="kafka-4.2",
                        help="whose semantics the broker serves in the scenarios (default kafka-4.2)")
    parser.add_argument("--work-dir", type=Path, help="keep the scenarios' data, traces and broker logs here")


def run(args: argparse.Namespace) -> int:
    bad_scenarios = _bad_scenarios(args.scenario or [])
    if bad_scenarios:  # before anything runs: a typo must not cost a whole suite
        print(f"kipcheck conformance: {bad_scenarios}", file=sys.stderr)
        return 2
    suite = [example for example in examples() if args.machine in (None, example.machine)]
    if not suite:
        print(f"no example traces for machine {args.machine!r}", file=sys.stderr)
        return 2
    failures = _judge_examples(suite, args.verbose)
    machines = len({example.machine for example in suite})
    checks = len(suite)
    if args.machine is None and not args.no_broker:
        scenario_checks, scenario_failures = _run_broker_scenarios(args)
        checks, failures = checks + scenario_checks, failures + scenario_failures
    print(f"\nverdict: {'PASS' if not failures else 'FAIL'}: {checks - failures} of {checks} conformance checks "
          f"as expected across {machines} machines" + (" and the broker scenarios" if checks > len(suite) else "")
          + ("" if not failures else f"; {failures} FAILED"))
    return 1 if failures else 0


def _judge_examples(suite: list, verbose: bool) -> int:
    """Judge the example traces; one line per machine (per trace with --verbose). Returns the failures."""
    print("example traces (allowed ones must pass; corrupted ones must be caught at their clause):")
    failures = 0
    for machine in sorted({example.machine for example in suite}):
        allowed = caught = 0
        clauses: set[str] = set()
        for example in (example for example in suite if example.machine == machine):
            verdict, as_expected = example.judge()
            if verbose or not as_expected:
                expectation = f"must fail at {example.expected_clause}" if example.expected_clause else "must pass"
                print(f"  {'PASS' if as_expected else 'FAIL'}  {example.path.name:<52} {expectation:<20} {verdict.summary()}")
            failures += not as_expected
            if as_expected and example.expected_clause:
                caught += 1
                clauses.add(example.expected_clause)
            elif as_expected:
                allowed += 1
        shown = ", ".join(sorted(clauses, key=lambda clause: int(clause.split("-")[1])))
        print(f"  {machine:<17} {allowed:>3} allowed as expected, {caught:>3} violations caught ({shown})")
    return failures


def _bad_scenarios(names: list[str]) -> str | None:
    """Why the --scenario names cannot run (unknown, or the clients are missing); None when they can."""
    if not names:
        return None
    try:
        from kipcheck.oracle.conformance.scenarios import SCENARIOS
    except ImportError as error:
        return f"--scenario needs the broker scenarios, which cannot run: {error} (install confluent-kafka==2.16.1)"
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        return f"unknown scenario{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} (known: {', '.join(SCENARIOS)})"
    return None


def _run_broker_scenarios(args: argparse.Namespace) -> tuple[int, int]:
    """Run the broker scenarios; (checks run, failures)."""
    try:
        from kipcheck.oracle.conformance.scenarios import SCENARIOS, run_scenarios
    except ImportError as error:
        print(f"\nbroker scenarios skipped: {error} (install confluent-kafka==2.16.1)")
        return 0, 0
    names = args.scenario or list(SCENARIOS)
    print("\nbroker scenarios (real clients against the reference broker; about 10 s each):", flush=True)
    with tempfile.TemporaryDirectory(prefix="kipcheck-conformance-") as temporary:
        work_root = args.work_dir or Path(temporary)
        profiles = ("kafka-4.2", "kip") if args.broker_profile == "both" else (args.broker_profile,)
        results = [result for profile in profiles for result in
                   run_scenarios(work_root, names, report=lambda result: print(result.summary(), flush=True), profile=profile)]
    return len(results), sum(not result.ok for result in results)
