"""kipcheck conform: the conformance runner, with a verdict per machine and clause (`conformance` is its alias)."""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

from kipcheck.model.profiles import PROFILES
from kipcheck.oracle.examples import examples

DESCRIPTION = """\
Judge a share-group broker against the spec, from the outside.

First the bundled example traces are judged (allowed ones must pass, those
under violations/ must be caught at the clause their name ends with). Then the
target is probed:

{targets}

The probes speak the protocol themselves (kio) as careless and hostile
clients would: a named catalogue (session limit, wrong and stale epochs,
foreign, duplicate, late and past-the-end acknowledgements, partial
acknowledgements then lock expiry, acknowledgements in the final request, a
poison message, a consumer crash, interleaved releases, the in-flight limit,
a broker restart followed by reads of every partition), then seeded swarm runs
until the budget is spent. What each probe saw is written as share-partition
and share-session traces (SPSO read with DescribeShareGroupOffsets after
every step that may move it; lock timers judged with a tolerance) and judged.
On the embedded target every client scenario runs too, each on a broker of its
own: real confluent-kafka clients through share groups (compressed and
idempotent producers, implicit and explicit acknowledgement, the delivery
limit, a consumer or the broker killed -9) and consumer groups (classic and
KIP-848, members leaving, joining and killed -9, offsets across a broker kill);
KIP-983 consumers beside confluent-kafka ones; kio consumers sharing one
partition by key range with individual commit, their ranges given by hand or by
the KIP-848 coordinator's key-range assignor as members join and leave; what
Kafka 4.2 adds to share groups, spoken through kio's ShareFetch and
ShareAcknowledge v2 (RENEW, record_limit, throttled redelivery,
acknowledgements around SPSO, a group emptied by its last connection);
transactions read `read_committed` and DeleteRecords. Every trace the broker
and the consumers wrote is judged. On kafka:LINE, the client scenarios that run
on a broker they did not start run too, on its cluster after the probes
(share-groups, explicit-acknowledgement, plain-fetch, groups-broker-killed).
With --java-clients, Apache Kafka's own
Java clients run scenarios too, on the embedded target (each on a broker of
its own) and on kafka:LINE (on its cluster, after the probes): a
KafkaShareConsumer acknowledging implicitly and explicitly (accept, release,
reject, RENEW), the record_limit acquire mode, commitSync and commitAsync,
close and a JVM killed -9; KafkaConsumers in classic and KIP-848 groups with
a rebalance listener and commits. Each is judged by what its clients saw, and
by the broker's traces.

The verdict is a table per machine and clause: passed, failed, or not
observable on this target. The first failure is shrunk to a minimal trace
that `kipcheck check` reproduces, and the command that replays its run is printed.

Before probing, the runner waits (--target-timeout) until the target serves
share groups, and reads the share settings it describes about itself
(DescribeConfigs of its broker resource; the lock duration of every ShareFetch
answer): they replace Kafka's defaults where --set says nothing. A target that
is never reachable is one line and exit status 2; a target that goes away
during a run makes that run inconclusive, never failed.

exit status: 0 everything as expected, 1 a failure (a clause broken), 2 bad
arguments, or a target that could not be reached or went away (not judged)."""

DEFAULT_BUDGET_S = 60.0
HELP_COLUMN = 29  # where a target's lines start in the description


def configure(parser: argparse.ArgumentParser) -> None:
    from kipcheck.oracle.conformance.targets import BrokerSettings, forms
    from kipcheck.oracle.conformance.targets.contact import CONTACT_TIMEOUT_S

    parser.description = DESCRIPTION.format(targets=_targets_help())
    *others, last = forms()
    parser.add_argument("--target",
                        help=f"{others[0]} (default; kafka:4.4 under --profile kafka-4.4), {', '.join(others[1:])} "
                             f"or {last}")
    parser.add_argument("--profile", choices=PROFILES,
                        help="whose semantics the broker is judged by (default: the target's, kafka-4.4 for "
                             "kafka:4.4, else kafka-4.2); kafka-4.4 judges Kafka 4.4 itself and other "
                             "implementations, not the reference broker (embedded, reference)")
    parser.add_argument("--seed", type=int, default=1, help="first swarm seed (default 1); a failure names its seed")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                        help=f"time for the probes: the catalogue, then swarm runs (default {DEFAULT_BUDGET_S:.0f})")
    parser.add_argument("--scenario", action="append", metavar="NAME",
                        help="run only this scenario (repeatable): a catalogue name, swarm, swarm:SEED, or a client scenario")
    parser.add_argument("--machine", help="judge only this machine's example traces, and run no probes")
    parser.add_argument("--no-broker", action="store_true", help="judge the example traces only")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help=f"a share setting of a wire target, by Kafka's name ({', '.join(BrokerSettings.NAMES)}), "
                             "for a broker that does not describe it (DescribeConfigs); else the broker's word, "
                             "else Kafka's default")
    parser.add_argument("--target-timeout", type=float, default=CONTACT_TIMEOUT_S, metavar="SECONDS",
                        help=f"how long to wait for the target to serve share groups (default {CONTACT_TIMEOUT_S:.0f})")
    parser.add_argument("--tolerance-ms", type=int, default=None, metavar="MS",
                        help="how late a lock timer may fire, as seen from the client (default 300)")
    parser.add_argument("--launcher", metavar="COMMAND",
                        help="embedded: run COMMAND instead of `kipcheck broker` (it must take the same flags)")
    parser.add_argument("--java-clients", action="store_true",
                        help="embedded and kafka:LINE: also run the client scenarios of Apache Kafka's own Java "
                             "clients (java-*: KafkaShareConsumer and KafkaConsumer; a JVM each, about 40 s in all; "
                             "they need Java 17 and Kafka's jars, `make kafka`)")
    parser.add_argument("--first-failure", action="store_true", help="stop probing at the first failure")
    parser.add_argument("--compare", metavar="TARGET",
                        help="also run the same probe runs, and the client scenarios TARGET runs too, against "
                             "TARGET (e.g. kafka:4.2) and compare what the clients saw and what each run left "
                             "behind, observation by observation (spec/conformance.md, Comparing two brokers)")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write the results as JUnit XML")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="also write a self-contained HTML report: the table, and for each counterexample a "
                             "picture of its steps, one lane per member, up to the failing one")
    parser.add_argument("--work-dir", type=Path, help="keep traces, broker data and logs here (default: a temporary "
                                                      "directory, kept only when something failed)")
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per example trace and every clause")


def _targets_help() -> str:
    """Each --target form with its lines, as the description lists them."""
    from kipcheck.oracle.conformance.targets import forms

    lines = []
    for form, text in forms().items():
        head, rows = f"  --target {form}", text.splitlines()
        lines.append(f"{head:<{HELP_COLUMN}}{rows.pop(0)}" if len(head) < HELP_COLUMN else head)
        lines += [" " * HELP_COLUMN + row for row in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from kipcheck.oracle.conformance.targets import (
        TargetError, TargetOptions, default_profile, default_target, resolve,
    )

    probing = args.machine is None and not args.no_broker
    try:
        args.target = args.target or default_target(args.profile)
        profile = args.profile or default_profile(args.target)
        options = TargetOptions(profile, _settings(args.set, profile),
                                tuple(shlex.split(args.launcher)) if args.launcher else None, args.java_clients)
        # Only a target that will be probed is resolved: judging the examples needs none.
        target = resolve(args.target, options) if probing else None
        probes, clients = target.scenarios(args.scenario or []) if probing else ([], [])
        compared = resolve(args.compare, options) if args.compare and probing else None
        if args.budget <= 0 or args.target_timeout < 0 or (args.tolerance_ms is not None and args.tolerance_ms < 0):
            raise TargetError("--budget must be > 0, --target-timeout and --tolerance-ms >= 0")
    except ValueError as error:  # TargetError: before anything runs, a typo must not cost a whole run
        print(f"kipcheck conform: {error}", file=sys.stderr)
        return 2
    if probing and not _reachable(target, args.target_timeout):
        return 2
    suite = [example for example in examples() if args.machine in (None, example.machine)]
    if not suite:
        print(f"kipcheck conform: no example traces for machine {args.machine!r}", file=sys.stderr)
        return 2
    cases: list = []
    failures = _judge_examples(suite, args.verbose, cases)
    not_judged = None
    if probing:
        probed, not_judged = _probe_target(args, target, probes, clients, cases, compared)
        failures += probed
    if args.junit is not None:
        from kipcheck.oracle.conformance.report import write_junit

        write_junit(args.junit, cases)
    verdict = "PASS" if not failures else "FAIL"
    if not failures and not_judged:
        verdict = "NOT JUDGED"
    print(f"\nverdict: {verdict}: {len(cases) - failures} of {len(cases)} conformance checks "
          f"as expected" + (f"; {failures} FAILED" if failures else "") + (f"; {not_judged}" if not_judged else ""))
    return 1 if failures else 2 if not_judged else 0


def _reachable(target, timeout_s: float) -> bool:
    """A target reached over the wire before anything runs (one the runner starts is waited for once started):
    False, with one line on stderr, when it does not serve share groups within `timeout_s`."""
    from kipcheck.oracle.conformance.targets.contact import TargetUnreachable, wait_ready

    if target.address is None:
        return True
    try:
        wait_ready(target.address, timeout_s)
    except TargetUnreachable as error:
        print(f"kipcheck conform: cannot probe {target.name}: {error}", file=sys.stderr)
        return False
    return True


def _settings(pairs: list[str], profile: str) -> dict[str, str]:
    from kipcheck.oracle.conformance.targets import BrokerSettings, TargetError

    settings = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or name not in BrokerSettings.NAMES:
            raise TargetError(f"--set {pair!r}: expected NAME=VALUE with NAME one of {', '.join(BrokerSettings.NAMES)}")
        settings[name] = value
    BrokerSettings.from_properties(settings, profile)
    return settings


def _compare(args, outcome, compared, work_dir: Path, cases: list) -> tuple[int, str | None]:
    """The first target's probe runs and the client scenarios `compared` runs too, by name, on `compared`: its
    verdict, then the comparison. Returns its
    failures and each unexplained difference, and what could not be judged (`compared` unreachable or gone)."""
    from kipcheck.oracle.conformance import session
    from kipcheck.oracle.conformance.compare import ALLOWED, FINDINGS, compare_runs

    names = [run.name for run in outcome.probe_runs]
    clients = [result.name for result in outcome.client_results if result.name in compared.client_scenarios()]
    other = session.run(compared, names, clients, work_dir, args.seed, float("inf"), args.tolerance_ms,
                        contact_timeout_s=args.target_timeout)
    if other.unreachable is not None:
        print(f"kipcheck conform: cannot probe {compared.name}: {other.unreachable}", file=sys.stderr)
        return 0, f"{args.compare} could not be reached"
    print(other.render(args.verbose, args.compare))
    cases += [(f"{args.compare}: {suite}", *rest) for suite, *rest in other.junit_cases()]
    comparison = compare_runs(outcome.probe_runs, other.probe_runs, outcome.client_results, other.client_results)
    print(comparison.render(args.target, args.compare))
    cases += [("comparison", name, 0.0, None if name in ALLOWED or name in FINDINGS else comparison.examples[name],
               None) for name in comparison.classes]
    lost = f"{args.compare} went away during {len(other.lost)} run(s)" if other.lost else None
    return other.failures + comparison.unexplained, lost


def _judge_examples(suite: list, verbose: bool, cases: list) -> int:
    """Judge the example traces; one line per machine (per trace with --verbose), one JUnit case each added to
    `cases`. Returns the failures."""
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
            cases.append((f"examples/{machine}", example.path.name, 0.0, None if as_expected else verdict.summary(), None))
            if as_expected and example.expected_clause:
                caught += 1
                clauses.add(example.expected_clause)
            elif as_expected:
                allowed += 1
        shown = ", ".join(sorted(clauses, key=lambda clause: int(clause.split("-")[1])))
        print(f"  {machine:<17} {allowed:>3} allowed as expected, {caught:>3} violations caught ({shown})")
    return failures


def _probe_target(args, target, probes: list[str], clients: list[str], cases: list,
                  compared=None) -> tuple[int, str | None]:
    """Probe the target, run the client scenarios, judge everything, print the table; with `compared`, the same
    probe runs on it, judged and compared. Returns the failures, and what could not be judged (the target
    unreachable or gone), if anything."""
    from kipcheck.oracle.conformance import session

    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="kipcheck-conform-"))
    outcome = session.run(target, probes, clients, work_dir, args.seed, args.budget, args.tolerance_ms,
                          args.first_failure, args.target_timeout)
    if outcome.unreachable is not None:
        print(f"kipcheck conform: cannot probe {target.name}: {outcome.unreachable}", file=sys.stderr)
        return 0, "the target could not be reached"
    print(outcome.render(args.verbose, args.target))
    cases += outcome.junit_cases()
    failures = outcome.failures
    not_judged = f"the target went away during {len(outcome.lost)} run(s)" if outcome.lost else None
    if compared is not None:
        compared_failures, compared_not_judged = _compare(args, outcome, compared, work_dir / "compared", cases)
        failures += compared_failures
        not_judged = "; ".join(filter(None, [not_judged, compared_not_judged])) or None
    if args.html is not None:
        from kipcheck.oracle.conformance.picture import write_html

        write_html(args.html, outcome.table(args.verbose), outcome.counterexamples())
    if failures == 0 and not not_judged and args.work_dir is None:
        import shutil

        shutil.rmtree(work_dir, ignore_errors=True)
    elif failures or not_judged:
        print(f"\ntraces, broker data and logs kept in {work_dir}")
    return failures, not_judged
