"""kipcheck check FILE...: judge traces against the models."""

from __future__ import annotations

import argparse
import sys

from kipcheck.oracle.check import check_file

SUMMARY = "judge trace files (exit 0 all allowed, 1 a violation, 2 malformed input)"
DESCRIPTION = """\
Judge each trace file (JSON Lines, see TRACE-FORMAT.md) against the model of
its machine, and print one verdict line per file. For a violation the line
names the first disallowed step, the spec clause it breaks, what the model
allowed and what was observed; for malformed input, the line number and the
reason.

exit status: 0 every step of every file is allowed, 1 some trace breaks a
clause, 2 some input is malformed (unreadable, bad JSON, unknown machine, op
or config key, missing required field). Malformed input is never a pass."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="trace files to judge ('-' reads standard input)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only the verdicts that are not ok")


def run(args: argparse.Namespace) -> int:
    from kipcheck.oracle.check import check_lines

    worst = 0
    for name in args.files:
        verdict = check_lines(sys.stdin.buffer, "<stdin>") if name == "-" else check_file(name)
        worst = max(worst, verdict.exit_code)
        if verdict.status != "ok" or not args.quiet:
            print(verdict.summary(), flush=True)
    return worst
