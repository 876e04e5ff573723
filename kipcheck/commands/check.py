"""kipcheck check FILE...: judge traces against the models."""

from __future__ import annotations

import argparse
import os
import sys
from typing import BinaryIO, Iterator

from kipcheck.oracle.check import Verdict, check_file, check_lines

DESCRIPTION = """\
Judge each trace file (JSON Lines, see TRACE-FORMAT.md) against the model of
its machine, and print one verdict line per file. For a violation the line
names the first disallowed step, the spec clause it breaks and its title, what
the model allowed and what was observed, and the command that prints the
clause (kipcheck spec --show ID); for malformed input, the line number (when
there is one) and the reason. Blank lines after the header are ignored, and a
header with no steps passes with "0 steps" (spec/README.md, "Reading traces").
Large files show a progress bar on a terminal.

exit status: 0 every step of every file is allowed, 1 some trace breaks a
clause, 2 some input is malformed (unreadable, bad JSON, unknown machine, op,
field or config key, missing required field). Malformed input is never a pass."""

PROGRESS_MIN_BYTES = 32 * 1024 * 1024
PROGRESS_EVERY_LINES = 20_000


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="trace files to judge ('-' reads standard input)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only the verdicts that are not ok")
    parser.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    parser.add_argument("--reference", action="store_true",
                        help="judge with the plain models, not the fast acceptors of impl/fastcheck/ (slower; "
                             "the two give the same verdicts)")


def _with_progress(lines: BinaryIO, total_bytes: int, name: str) -> Iterator[bytes]:
    from tqdm import tqdm

    with tqdm(total=total_bytes, unit="B", unit_scale=True, desc=os.path.basename(name), leave=False) as bar:
        done = pending = 0
        for done, line in enumerate(lines, start=1):
            pending += len(line)
            if done % PROGRESS_EVERY_LINES == 0:
                bar.update(pending)
                pending = 0
            yield line
        bar.update(pending)


def _judge(name: str, progress: bool, reference: bool) -> Verdict:
    if name == "-":
        return check_lines(sys.stdin.buffer, "<stdin>", reference)
    try:
        size = os.path.getsize(name)
    except OSError:
        return check_file(name, reference)  # reports why it cannot be read
    if not progress or size < PROGRESS_MIN_BYTES:
        return check_file(name, reference)
    with open(name, "rb") as lines:
        return check_lines(_with_progress(lines, size, name), name, reference)


def run(args: argparse.Namespace) -> int:
    progress = not args.no_progress and sys.stderr.isatty()
    worst = 0
    for name in args.files:
        verdict = _judge(name, progress, args.reference)
        worst = max(worst, verdict.exit_code)
        if verdict.status != "ok" or not args.quiet:
            print(verdict.summary(), flush=True)
    return worst
