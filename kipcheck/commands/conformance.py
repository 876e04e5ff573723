"""kipcheck conformance: the main job, with a readable verdict."""

from __future__ import annotations

import argparse
import sys

from kipcheck.oracle.examples import examples

SUMMARY = "run the conformance suite and print a readable verdict"
DESCRIPTION = """\
Run the conformance suite. It judges every bundled example trace (one folder
per machine; traces under violations/ must be caught at the clause their name
ends with) and prints one line per trace and a verdict.

exit status: 0 every check behaved as expected, 1 otherwise."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--machine", help="only this machine's traces")


def run(args: argparse.Namespace) -> int:
    suite = [example for example in examples() if args.machine in (None, example.machine)]
    if not suite:
        print(f"no example traces for machine {args.machine!r}", file=sys.stderr)
        return 2
    failures = 0
    for example in suite:
        verdict, as_expected = example.judge()
        expectation = f"must fail at {example.expected_clause}" if example.expected_clause else "must pass"
        mark = "PASS" if as_expected else "FAIL"
        failures += not as_expected
        print(f"{mark}  {example.machine:<17} {example.path.name:<48} {expectation:<22} -> {verdict.summary().split('  ')[0].strip()}"
              + ("" if as_expected else f"\n      {verdict.summary()}"))
    machines = len({example.machine for example in suite})
    print(f"\nverdict: {len(suite) - failures} of {len(suite)} conformance checks as expected across {machines} machines"
          + ("" if not failures else f"; {failures} FAILED"))
    return 1 if failures else 0
