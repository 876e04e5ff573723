"""kipcheck spec: list the spec clauses."""

from __future__ import annotations

import argparse
import sys

from kipcheck.spec import PREFIXES, cited, clauses, find

DESCRIPTION = """\
List every clause of the normative spec (spec/*.md): its id, the machine it
belongs to, the profile it holds under and its title. Decisions (where the
seeds are silent or contradict each other) are marked with a D."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--machine", choices=sorted(PREFIXES.values()), help="only this machine's clauses")
    parser.add_argument("--show", metavar="ID", help="print one clause in full (any case: sp-21 or SP-21)")
    parser.add_argument("--decisions", action="store_true", help="only the decisions, with their reasons")


def run(args: argparse.Namespace) -> int:
    every = clauses()
    if args.show:
        clause = find(args.show)
        if clause is None:
            print(f"no clause {args.show!r} (ids look like SP-21; `kipcheck spec` lists them)", file=sys.stderr)
            return 2
        print(f"{clause.id}: {clause.title}\nmachine: {clause.machine}\nsource: {cited(clause.seed)}\n"
              f"profile: {clause.profile}")
        if clause.decision:
            print(f"decision: {clause.decision}")
        print(f"\n{clause.text}")
        return 0
    for clause in every.values():
        if (args.machine and clause.machine != args.machine) or (args.decisions and not clause.decision):
            continue
        marker = "D" if clause.decision else " "
        print(f"{clause.id:<7} {marker} {clause.machine:<17} {clause.profile:<20} {clause.title}")
        if args.decisions:
            print(f"          {clause.decision}")
    return 0
