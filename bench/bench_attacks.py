"""The reference broker under attack, measured: per attack, what another client saw, what the broker held,
what was lost (a script, not a test).

    .venv/bin/python bench/bench_attacks.py                       # this checkout's broker
    .venv/bin/python bench/bench_attacks.py --before c6a89c1      # and the broker of an older commit beside it
    .venv/bin/python bench/bench_attacks.py --case bomb --case slowloris

Each attack runs against a fresh broker (no traces). While it runs, another client (tests/stall_probe.py)
sends ApiVersions every 20 ms on its own connection and the longest round trip is kept: the longest stall
another client saw. The broker's peak resident memory (VmHWM, reset after start-up) gives what it held,
beside the bytes the attacker sent. "lost" says what the victims could not read, or who was locked out:
- forged-marker: a client forges an ABORT marker with a transactional victim's producer id and epoch; the
  victim commits 50 records; lost = committed records a read_committed consumer does not read;
- made-up-transaction: a transactional batch with a made-up producer id and no transactional id, then 5
  plain records; lost = records a read_committed consumer does not read;
- malformed-records: the malformed batches of tests/crafted_batches.py (every codec), then 20 good records;
  lost = good records a librdkafka consumer does not read;
- bomb: a zstd batch of 1.2 million records (0.9 MB), then a key-range Fetch of half the hash space;
  lost = the fetching connection closed;
- decode-expansion: one Metadata request of 600,000 topic ids (10 MiB);
- slowloris: max.connections=50 taken by connections trickling a frame; lost = seconds a new client
  waited to be served (at most 20);
- near-cap-commit: one OffsetCommit of a million ranges;
- heartbeat-flood: 20,000 share groups, one ShareGroupHeartbeat each; the flood's own time is printed too;
- join-metadata: 200 classic members join one group with 512 KiB of protocol metadata each.
`--before REV` runs the same attacks against the broker of git revision REV (a temporary worktree, its
packages laid out as kipcheck's), so one run prints before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from attacks import (  # noqa: E402
    commit_ranges, fetch_key_range, forged_abort, join_with_metadata, many_tiny_records, metadata_by_topic_ids,
    produce_raw, read_committed, send_and_read, stored_batches, victim_transaction)
from bench_broker import revision_launcher  # noqa: E402  (beside this script)
from crafted_batches import CODECS, TRANSACTIONAL, ZSTD, batch, good_records, malformed_batches  # noqa: E402
from stall_probe import StallProbe  # noqa: E402

from kipcheck.oracle.conformance.probes.raw_client import RawClient  # noqa: E402
from kipcheck.oracle.conformance.scenarios.clients import create_topic, produce, read_plain  # noqa: E402
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker  # noqa: E402

LOCKOUT_MAX_S = 20


# -- the attacks: each returns (bytes the attacker sent, what was lost) -------------------------------------

def forged_marker(broker) -> tuple[int, str]:
    create_topic(broker.bootstrap, "ledger", 1)
    victim = victim_transaction(broker.bootstrap, "ledger", 50)
    (_, header), = stored_batches(broker.port, "ledger")
    forged = forged_abort(header.producer_id, header.producer_epoch)
    produce_raw(broker.port, "ledger", forged)
    victim.commit_transaction(60)
    return len(forged), f"{50 - len(read_committed(broker.bootstrap, 'ledger', 50))} of 50 committed records"


def made_up_transaction(broker) -> tuple[int, str]:
    create_topic(broker.bootstrap, "orders", 1)
    made_up = batch(good_records(3), 3, producer_id=424242, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL)
    produce_raw(broker.port, "orders", made_up)
    produce(broker.bootstrap, "orders", [(0, b"k", b"later-%d" % index) for index in range(5)])
    return len(made_up), f"{5 - len(read_committed(broker.bootstrap, 'orders', 5))} of 5 later records"


def malformed_records(broker) -> tuple[int, str]:
    create_topic(broker.bootstrap, "poison", 1)
    sent = 0
    for codec in CODECS:
        for _, data in malformed_batches(codec):
            produce_raw(broker.port, "poison", data)
            sent += len(data)
    produce(broker.bootstrap, "poison", [(0, b"k", b"good-%d" % index) for index in range(20)])
    good = [message for message in read_plain(broker.bootstrap, "poison", 1, 10_000, timeout_s=15)
            if message.value().startswith(b"good-")]
    return sent, f"{20 - len(good)} of 20 good records"


def bomb(broker) -> tuple[int, str]:
    create_topic(broker.bootstrap, "bombed", 1, configs={"accept.range.fetch": "true"})
    count = 1_200_000
    data = batch(many_tiny_records(count), count, codec=ZSTD)
    produce_raw(broker.port, "bombed", data)
    return len(data), "the fetching connection" if fetch_key_range(broker.port, "bombed", 1) is None else "nothing"


def decode_expansion(broker) -> tuple[int, str]:
    frame = metadata_by_topic_ids(600_000)
    return len(frame), "nothing" if send_and_read(broker.port, frame) is not None else "its own connection"


def slowloris(broker) -> tuple[int, str]:
    trickling = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(50)]
    for connection in trickling:
        connection.sendall(struct.pack(">i", 100) + b"\x00")
    started = time.monotonic()
    try:
        client = RawClient(broker.port, timeout_s=LOCKOUT_MAX_S)
        client.request(18, 3, client_software_name="newcomer", client_software_version="1")
        client.close()
        waited = time.monotonic() - started
    except OSError:
        waited = LOCKOUT_MAX_S
    finally:
        for connection in trickling:
            connection.close()
    return 50 * 5, f"a new client waited {waited:.1f} s" + (" (gave up)" if waited >= LOCKOUT_MAX_S else "")


def near_cap_commit(broker) -> tuple[int, str]:
    create_topic(broker.bootstrap, "ledger", 1)
    answer = commit_ranges(broker.port, "ledger", 1_000_000)
    return 16 * 1_000_000, f"nothing (answered {answer or 'by closing its connection'})"


def heartbeat_flood(broker) -> tuple[int, str]:
    client = RawClient(broker.port, timeout_s=600)
    started = time.monotonic()
    for number in range(20_000):
        client.request(76, 1, group_id=f"g{number}", member_id=str(uuid.uuid4()), member_epoch=0, rack_id=None,
                       subscribed_topic_names=["t"])
    client.close()
    return 20_000 * 80, f"nothing (the flood took {time.monotonic() - started:.1f} s)"


def join_metadata(broker) -> tuple[int, str]:
    with ThreadPoolExecutor(200) as members:
        listed = max(members.map(lambda number: join_with_metadata(broker.port, "big", bytes([number]) * (512 << 10)),
                                 range(200)))
    return 200 * (512 << 10), f"{200 - listed // (512 << 10)} of 200 members' metadata not given to the leader"


CASES = {"forged-marker": forged_marker, "made-up-transaction": made_up_transaction,
         "malformed-records": malformed_records, "bomb": bomb, "decode-expansion": decode_expansion,
         "slowloris": slowloris, "near-cap-commit": near_cap_commit, "heartbeat-flood": heartbeat_flood,
         "join-metadata": join_metadata}
SETTINGS = {"slowloris": {"max.connections": "50"}}


def run(case: str, launcher: tuple[str, ...], work_dir: Path) -> str:
    settings = {"share.auto.offset.reset": "earliest", **SETTINGS.get(case, {})}
    with EmbeddedBroker(work_dir, settings, launcher=launcher, traced=False) as broker:
        broker.reset_peak_memory()
        before = broker.peak_memory_bytes()
        with StallProbe(broker.port) as probe:
            sent, lost = CASES[case](broker)
        held = broker.peak_memory_bytes() - before
        alive = "" if broker.alive() else ", the broker died"
    return (f"{held / (1 << 20):8.1f} MiB held for {sent / (1 << 20):7.2f} MiB sent, "
            f"longest stall {probe.longest_s:6.2f} s, lost: {lost}{alive}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="an attack (default: every one)")
    parser.add_argument("--before", metavar="REV", help="also run the attacks against the broker of this git revision")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, contextlib.ExitStack() as revisions:
        brokers = {"after": DEFAULT_LAUNCHER}
        if args.before:
            brokers = {"before": revisions.enter_context(revision_launcher(args.before, Path(scratch) / "before")),
                       **brokers}
        for case in args.case or CASES:
            for name, launcher in brokers.items():
                line = run(case, launcher, Path(tempfile.mkdtemp(dir=scratch)))
                print(f"{case:20s} {name:6s} {line}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

if __name__ == "__main__":
    threading.excepthook = lambda hook: None  # a probe thread cut off by a dying broker is part of the figures
    main()
