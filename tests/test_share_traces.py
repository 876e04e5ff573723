"""oracle/share_traces.py: what a client's requests and their answers become, for the probe and for the recording
proxy alike (the answers built as kio reads them: partitions with an error code and acquired records)."""

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from kipcheck.oracle.check import check_lines
from kipcheck.oracle.share_traces import ShareSteps, TraceBook


@dataclass
class Member:
    name: str = "alice"
    epoch: int = 0
    session: set = field(default_factory=set)


def fetched(*runs, error="none"):
    """A ShareFetch answer's partition: `runs` acquired (first, last, delivery_count), no record bytes."""
    return SimpleNamespace(error_code=SimpleNamespace(name=error), records=None, acknowledge_error_code=0,
                           acquired_records=[SimpleNamespace(first_offset=first, last_offset=last, delivery_count=count)
                                             for first, last, count in runs])


def acknowledged():
    return SimpleNamespace(error_code=0)


def books(profile: str, log_batch: int):
    """Traces of t:0 and t:1, each partition's log one batch of `log_batch` records."""
    header = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": profile,
              "config": {"record_lock_duration_ms": 30_000}}
    sessions = TraceBook({"format": "kipcheck-trace", "version": 1, "machine": "share-session", "profile": profile,
                          "config": {"max_sessions": 10}})
    partitions = {tp: TraceBook(dict(header)) for tp in ("t:0", "t:1")}
    for book in partitions.values():
        book.add(0, "log", "append", {"count": log_batch})
    steps = ShareSteps(profile, sessions=lambda _: sessions, partitions=lambda _, tp: partitions[tp],
                       held=lambda _: list(partitions))
    return steps, sessions, partitions


def judged(book: TraceBook):
    return check_lines(book.lines())


@pytest.mark.parametrize("profile", ["kafka-4.2", "kip"])
def test_a_closed_session_releases_in_its_partitions_only_under_kafka(profile):
    """SS-30: the member forgot t:1 while holding records there; closing its session releases them under the
    Kafka profiles only in t:0 (in t:1 they wait for their locks), under kip everywhere."""
    steps, sessions, partitions = books(profile, 2)
    alice = Member()
    steps.share_fetch(alice, 0, ["t:0", "t:1"], {}, "NONE", {"t:0": fetched((0, 1, 1)), "t:1": fetched((0, 1, 1))},
                      10, 11, max_records=2)
    steps.share_fetch(alice, 1, [], {}, "NONE", {}, 20, 21, max_records=2, forget=["t:1"])
    assert alice.session == {"t:0"}
    steps.share_fetch(alice, -1, [], {}, "NONE", {}, 30, 31, max_records=2)
    left = {tp: [step["op"] for step in book.steps].count("leave") for tp, book in partitions.items()}
    assert left == ({"t:0": 1, "t:1": 0} if profile == "kafka-4.2" else {"t:0": 1, "t:1": 1})
    assert sessions.steps[0]["observed"]["acquired_in"] == ["t:0", "t:1"], "SS-19: where the first fetch acquired"
    assert "acquired_in" not in sessions.steps[1]["observed"], "nothing acquired, nothing said"
    assert [judged(book).status for book in (sessions, *partitions.values())] == ["ok"] * 3


def test_a_share_acknowledge_changes_no_partition_of_the_session_and_a_renewal_is_written_as_one():
    """SS-14: a ShareAcknowledge in a partition outside the session leaves the session as it was (the next fetch
    writes no acquisition there); SP-41: IsRenewAck makes each acknowledgement a renewal for the answer's lock."""
    steps, sessions, partitions = books("kafka-4.2", 4)
    alice = Member()
    steps.share_fetch(alice, 0, ["t:0"], {}, "NONE", {"t:0": fetched((0, 3, 1))}, 10, 11, max_records=4)
    steps.share_acknowledge(alice, 1, {"t:0": [(0, 1, "renew")]}, "NONE", {"t:0": acknowledged()}, 20,
                            renew_lock_ms=30_000)
    steps.share_acknowledge(alice, 2, {"t:1": [(0, 0, "accept")]}, "NONE", {"t:1": acknowledged()}, 30)
    assert alice.session == {"t:0"} and alice.epoch == 3
    renewal = partitions["t:0"].steps[-1]
    assert renewal["op"] == "acknowledge" and renewal["args"]["renew"] is True
    assert renewal["args"]["lock_duration_ms"] == 30_000
    renewed = steps.share_fetch(alice, 3, [], {"t:0": [(2, 3, "renew")]}, "NONE", {"t:0": fetched()}, 40, 41,
                                max_records=4, renew_lock_ms=30_000)
    assert renewed == {}, "a renewing fetch acquires nothing"
    assert [step["op"] for step in partitions["t:0"].steps] == ["append", "acquire", "acknowledge", "acknowledge"]
    assert judged(partitions["t:0"]).status == "ok"


def test_acknowledgements_riding_on_an_acquiring_sharefetch_are_marked_in_fetch():
    """SP-67: the acknowledgements of a ShareFetch that acquires are marked `in_fetch` in each partition whose
    acquire step follows; those of a final ShareFetch (it acquires nothing), of a partition the answer refused,
    and of a ShareAcknowledge are not."""
    steps, _, partitions = books("kafka-4.2", 4)
    alice = Member()
    steps.share_fetch(alice, 0, ["t:0", "t:1"], {}, "NONE", {"t:0": fetched((0, 1, 1)), "t:1": fetched((0, 1, 1))},
                      10, 11, max_records=4)
    steps.share_fetch(alice, 1, [], {"t:0": [(0, 0, "release")], "t:1": [(0, 0, "accept")]}, "NONE",
                      {"t:0": fetched((2, 3, 1)), "t:1": fetched(error="not_leader_or_follower")}, 20, 21,
                      max_records=4)
    steps.share_acknowledge(alice, 2, {"t:0": [(1, 1, "accept")]}, "NONE", {"t:0": acknowledged()}, 30)
    steps.share_fetch(alice, -1, [], {"t:0": [(2, 3, "accept")]}, "NONE", {}, 40, 41, max_records=4)
    marks = {tp: [(step["op"], step["args"].get("in_fetch")) for step in book.steps if step["op"] != "append"]
             for tp, book in partitions.items()}
    assert marks["t:0"] == [("acquire", None), ("acknowledge", True), ("acquire", None), ("acknowledge", None),
                            ("acknowledge", None), ("leave", None)]
    assert marks["t:1"] == [("acquire", None), ("acknowledge", None), ("leave", None)]
