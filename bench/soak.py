"""Soak the reference broker: real clients while it is killed -9 in a loop and its disk fills and empties.

    sudo .venv/bin/python bench/soak.py [--seconds 60] [--disk-mib 8] [--rate 500] [--seed 1]

Mounts a tmpfs of --disk-mib as the broker's data dir (root only), then runs
kipcheck.oracle.conformance.scenarios.soak: an idempotent producer at --rate records/s,
--consumers ShareConsumers acknowledging with commit_sync, the broker killed -9
every few seconds and restarted, the disk filled to the last byte by a ballast
file now and then and emptied again. Prints records produced, acknowledged,
read back, lost (must be 0), the share group's deliveries, redeliveries and
acknowledgements (none lost), kills and disk-full cycles. Exits 1 if anything
acknowledged was lost.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from kipcheck.oracle.conformance.scenarios.soak import DiskUnavailable, SoakPlan, run_soak, small_disk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--disk-mib", type=int, default=8)
    parser.add_argument("--rate", type=int, default=500, help="records produced per second")
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    plan = SoakPlan(duration_s=args.seconds, records_per_s=args.rate, partitions=args.partitions,
                    consumers=args.consumers, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="kipcheck-soak-") as work:
        try:
            with small_disk(Path(work) / "data", args.disk_mib << 20):
                result = run_soak(Path(work), plan)
        except DiskUnavailable as error:
            print(f"soak: {error}", file=sys.stderr)
            return 2
    print(result.summary())
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
