"""kipcheck check FILE...: judge traces against the models."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
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

A directory stands for every *.jsonl file under it, in name order. With
--spark the files are judged in parallel on Spark (one trace per task; any
master URL, default local[*]) with the same verdicts and exit status; the
files must be readable where Spark's tasks run.

exit status: 0 every step of every file is allowed, 1 some trace breaks a
clause, 2 some input is malformed (unreadable, bad JSON, unknown machine, op,
field or config key, missing required field). Malformed input is never a pass."""

PROGRESS_MIN_BYTES = 32 * 1024 * 1024
PROGRESS_EVERY_LINES = 20_000


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE_OR_DIR",
                        help="trace files, or directories of *.jsonl traces, to judge ('-' reads standard input)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only the verdicts that are not ok")
    parser.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    parser.add_argument("--reference", action="store_true",
                        help="judge with the plain models, not the fast acceptors of oracle/judges/fast/ (slower; "
                             "the two give the same verdicts)")
    parser.add_argument("--spark", action="store_true",
                        help="judge the traces in parallel on Spark, one trace per task (needs the spark extra and Java)")
    parser.add_argument("--master", default="local[*]", help="Spark master URL for --spark (default: local[*])")


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


def expand(names: list[str]) -> list[str]:
    """The trace files named: a directory stands for its *.jsonl files (recursively, in name order)."""
    files: list[str] = []
    for name in names:
        if name != "-" and os.path.isdir(name):
            files += sorted(str(path) for path in Path(name).rglob("*.jsonl"))
        else:
            files.append(name)
    return files


def _verdicts(args: argparse.Namespace, files: list[str]) -> Iterator[Verdict]:
    if not args.spark:
        progress = not args.no_progress and sys.stderr.isatty()
        return (_judge(name, progress, args.reference) for name in files)
    from kipcheck.oracle.spark_check import check_on_spark

    verdicts = check_on_spark([os.path.abspath(name) for name in files], args.master, args.reference)
    for verdict, name in zip(verdicts, files):
        verdict.name = name  # as given, like the plain checker
    return iter(verdicts)


def run(args: argparse.Namespace) -> int:
    files = expand(args.files)
    if args.spark and "-" in files:
        print("kipcheck check: --spark reads files, not standard input", file=sys.stderr)
        return 2
    worst = 0
    for verdict in _verdicts(args, files):
        worst = max(worst, verdict.exit_code)
        if verdict.status != "ok" or not args.quiet:
            print(verdict.summary(), flush=True)
    return worst
