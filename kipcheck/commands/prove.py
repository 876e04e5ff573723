"""kipcheck prove: prove the models' theorems with z3."""

from __future__ import annotations

import argparse

DESCRIPTION = """\
Prove each theorem with z3 and print one line per theorem: its name, the spec
clauses it covers, then "proved", "refuted as expected" (a theorem stated to
fail, with z3's counterexample) or FAILED / UNKNOWN with a concrete
counterexample or z3's reason, and the time taken.

The theorems: the IC merge keeps the committed set and the normal form
(unbounded); the key-range split covers [0, 2^63-1] exactly once, near-equally,
for 1 to 2^16 owners, in the model's equal arithmetic and the seed's long division; KIP-287's linear hashing keeps keys on their processor while
partitions >= processors, and the counterexample when partitions < processors,
and a split moves keys only from its parent to the new partition (the ground
of the drain rule);
a bounded model check of the share-partition invariants. Each family also
checks that the model's own Python function agrees with the proved encoding
on sampled inputs, so a model that drifts fails here.

exit status: 0 every theorem holds (and every expected refutation was found),
1 some theorem failed or z3 could not decide it, 2 bad arguments."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", metavar="TEXT", help="only the theorems whose name contains TEXT (case-insensitive)")
    parser.add_argument("--list", action="store_true", help="list the theorems and their statements, prove nothing")
    parser.add_argument("--bmc-steps", type=int, metavar="K",
                        help="depth of the share-partition bounded model check (default 8, at most 30)")


def run(args: argparse.Namespace) -> int:
    from kipcheck.oracle import proofs
    from kipcheck.oracle.proofs import share_partition_bmc

    if args.bmc_steps is not None:
        if not 1 <= args.bmc_steps <= 30:
            print("--bmc-steps must be between 1 and 30")
            return 2
        share_partition_bmc.STEPS = args.bmc_steps
        print(f"share-partition bounded model check: {args.bmc_steps} steps")
    theorems = [theorem for theorem in proofs.all_theorems()
                if not args.only or args.only.lower() in theorem.name.lower()]
    if not theorems:
        print(f"no theorem matches {args.only!r}")
        return 2
    if args.list:
        for theorem in theorems:
            print(f"{theorem.name} [{', '.join(theorem.clauses)}]\n    {theorem.statement}")
        return 0
    failed = 0
    for theorem in theorems:
        result = proofs.run(theorem)
        failed += not result.ok
        detail = f": {result.detail}" if result.detail else ""
        # The one bound a user may change is the depth, so it is printed with the theorems it bounds.
        depth = f" (depth {share_partition_bmc.STEPS} steps)" if theorem in share_partition_bmc.THEOREMS[:2] else ""
        print(f"{result.status:<20} {result.seconds:6.2f}s  {theorem.name}{depth} [{', '.join(theorem.clauses)}]{detail}",
              flush=True)
    print(f"{len(theorems) - failed} of {len(theorems)} theorems hold")
    return 1 if failed else 0
