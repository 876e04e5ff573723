"""Revoke-delay scenarios: KIP-983 consumers (kipcheck's) beside real confluent-kafka consumers in one KIP-848 group.

    result = SCENARIOS["revoke-delay-neighbours"](work_dir)    # a ScenarioResult
    problems = traces_disagree(trace_dir)                              # [] when both sides tell one story

Neighbours: on a 6-partition topic a producer writes 200 records/s while the
group changes: two applications on kipcheck's consumer in KIP-983 mode
(revoke_member.py: 5 ms per record, one worker per partition, revokes
delayed until the partition's records are processed and committed) and one
confluent-kafka Consumer (group_member.py, group.protocol=consumer); a third
KIP-983 member joins; the confluent member leaves; a KIP-983 member leaves;
a confluent member joins. Checked: nothing produced is lost, nothing is
processed twice (every member commits before it lets a partition go), the
committed offsets end at the log end, every trace passes the oracle (the
KIP-983 consumers' own, and the coordinator's of every member, the
confluent ones included), and each KIP-983 consumer's trace tells what the
coordinator's tells of it.

Lost: a KIP-983 member too slow for its rebalance timeout (300 ms per
record, max.poll.interval.ms 2000) keeps delaying a revoke until the
coordinator fences it: its partitions are lost and reported once, it commits
nothing more for them, and the confluent neighbour takes over.
Records processed twice may only be the slow member's, above its last commit
before the loss (it resumes there too when it gets a partition back).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from kipcheck.oracle.conformance.scenarios.clients import create_topic
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.scenarios.groups import (
    FAST_GROUPS, PARTITIONS, MemberProcess, SteadyProducer, _committed, _wait)
from kipcheck.oracle.conformance.scenarios.runner import check, named_scenario

AGREED_OPS = ("assign", "revoke", "release")


def kip983_member(name: str, broker: EmbeddedBroker, group: str, processing_ms: float = 5,
                  settings: str = "-") -> MemberProcess:
    command = ["kipcheck.oracle.conformance.scenarios.revoke_member", broker.bootstrap, group, "work", "delay",
               str(processing_ms), str(broker.trace_dir), settings]
    return MemberProcess(name, broker, group, "consumer", "-", command=command)


def confluent_member(name: str, broker: EmbeddedBroker, group: str) -> MemberProcess:
    return MemberProcess(name, broker, group, "consumer", "-")


def _steps(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return [json.loads(line) for line in lines if line.endswith("}")]


def _story(steps: list[dict]) -> tuple[list[tuple[str, tuple[str, ...]]], set[str] | None]:
    """(assign, revoke and release steps up to the first loss, the partitions that loss names)."""
    story = []
    for step in steps:
        if step["op"] == "lose":
            return story, set(step["args"]["partitions"])
        if step["op"] in AGREED_OPS:
            story.append((step["op"], tuple(step["args"]["partitions"])))
    return story, None


def traces_disagree(trace_dir: Path) -> list[str]:
    """Where a KIP-983 consumer's trace and the coordinator's trace of the same member tell different stories.

    Both sides write assign, revoke and release in the order they happened to that member, up to the first
    loss: the consumer's story must be the start of the coordinator's (the consumer writes a decision when
    a poll learns it, so it may stop short: the coordinator also writes what came after the last poll, and
    the release of a leave); a partition the consumer says it lost must be one the coordinator took from it.
    """
    problems = []
    for mine in sorted(Path(trace_dir).glob("revoke-delay.consumer.*.jsonl")):
        theirs = mine.with_name(mine.name.replace(".consumer.", ".coordinator.", 1))
        (my_story, my_loss) = _story(_steps(mine))
        their_story, their_loss = _story(_steps(theirs)) if theirs.exists() else ([], None)  # nothing happened
        if my_story != their_story[:len(my_story)]:
            problems.append(f"{mine.name}: consumer says {my_story}, coordinator says {their_story}")
        if my_loss is not None and (their_loss is None or not my_loss <= their_loss):
            problems.append(f"{mine.name}: lost {sorted(my_loss)}, the coordinator took {sorted(their_loss or [])}")
    return problems


def _neighbours(broker: EmbeddedBroker) -> str:
    create_topic(broker.bootstrap, "work", PARTITIONS)
    members: dict[str, MemberProcess] = {}
    producer = SteadyProducer(broker.bootstrap, "work")

    def processed() -> list:
        return [record for member in members.values() for record in member.records()]

    def settle(label: str) -> None:
        _wait(lambda: producer.delivered, "the first records to be produced")
        target = set(producer.delivered)
        _wait(lambda: target <= set(processed()), f"the group to process again after {label}")

    try:
        members.update(k1=kip983_member("k1", broker, "mixed"), k2=kip983_member("k2", broker, "mixed"),
                       c1=confluent_member("c1", broker, "mixed"))
        for name in ("k1", "k2", "c1"):
            _wait(members[name].assigned, f"member {name} to be given partitions")
        settle("three members joined")
        for label, change in (("a KIP-983 member joined", lambda: _join(members, "k3", broker)),
                              ("the confluent member left", lambda: _leave(members, "c1")),
                              ("a KIP-983 member left", lambda: _leave(members, "k1")),
                              ("a confluent member joined", lambda: _join(members, "c2", broker))):
            change()
            settle(label)
        produced = producer.stop()
        _wait(lambda: produced <= set(processed()), "every record produced to be processed")
    finally:
        producer.stopping.set()
        for member in members.values():
            member.stop()
    twice = _twice(processed())
    check(not twice, f"records processed twice though every member commits first: {sorted(twice)[:10]}")
    return _verdict(broker, members, produced, "none processed twice")


def _commits_before_loss(member: MemberProcess) -> dict[int, int]:
    """The member's last offsets answered NONE before it first lost partitions: where another member resumed."""
    committed: dict[int, int] = {}
    for event in member.events():
        if event["event"] == "lost":
            break
        if event["event"] == "commit":
            committed.update({int(partition): offset for partition, offset in event["offsets"].items()})
    return committed


def _twice(records: list) -> set:
    return {record for record, count in Counter(records).items() if count > 1}


def _join(members: dict[str, MemberProcess], name: str, broker: EmbeddedBroker) -> None:
    members[name] = kip983_member(name, broker, "mixed") if name.startswith("k") else \
        confluent_member(name, broker, "mixed")
    _wait(members[name].assigned, f"the joining member {name} to be given partitions")


def _leave(members: dict[str, MemberProcess], name: str) -> None:
    members[name].stop()
    check(any(event["event"] == "closed" for event in members[name].events()), f"member {name} did not close cleanly")


def _verdict(broker: EmbeddedBroker, members: dict[str, MemberProcess], produced: set, twice: str) -> str:
    processed = {record for member in members.values() for record in member.records()}
    check(produced <= processed, f"{len(produced - processed)} records never processed")
    ends = {partition: 1 + max(offset for p, offset in produced if p == partition) for partition in range(PARTITIONS)}
    committed = _committed(broker, "mixed", "work", PARTITIONS)
    check(committed == ends, f"committed offsets {committed} do not end at the log end {ends}")
    problems = traces_disagree(broker.trace_dir)
    check(not problems, "; ".join(problems))
    consumers = len(list(broker.trace_dir.glob("revoke-delay.consumer.*.jsonl")))
    return (f"{len(produced)} records, none lost, {twice}; committed offsets at the log end; {consumers} KIP-983 "
            f"consumer traces agree with the coordinator's")


def _lost(broker: EmbeddedBroker) -> str:
    create_topic(broker.bootstrap, "work", PARTITIONS)
    members: dict[str, MemberProcess] = {}
    producer = SteadyProducer(broker.bootstrap, "work", rate_per_s=60)
    try:
        members["slow"] = kip983_member("slow", broker, "mixed", processing_ms=300, settings="max.poll.interval.ms=2000")
        _wait(members["slow"].assigned, "the slow member to be given partitions")
        _wait(lambda: len(members["slow"].records()) >= 10, "the slow member to process records")
        members["c1"] = confluent_member("c1", broker, "mixed")
        _wait(lambda: any(event["event"] == "lost" for event in members["slow"].events()),
              "the slow member to be fenced at its rebalance timeout and lose its partitions")
        members["slow"].stop()
        produced = producer.stop()
        _wait(lambda: produced <= {record for member in members.values() for record in member.records()},
              "every record produced to be processed")
    finally:
        producer.stopping.set()
        for member in members.values():
            member.stop()
    twice = _twice([record for member in members.values() for record in member.records()])
    slow_commits = _commits_before_loss(members["slow"])
    unexplained = {(partition, offset) for partition, offset in twice
                   if (partition, offset) not in set(members["slow"].records())
                   or offset < slow_commits.get(partition, 0)}
    check(not unexplained, f"records processed twice though committed first: {sorted(unexplained)[:10]}")
    return _verdict(broker, members, produced, f"{len(twice)} processed twice (the fenced member's, above its "
                                               f"last commit)")


SCENARIOS = {
    "revoke-delay-neighbours": named_scenario("revoke-delay-neighbours", _neighbours,
                                              "KIP-983 consumers and confluent-kafka consumers in one group as members "
                                              "join and leave: nothing lost or processed twice, every trace allowed.",
                                              FAST_GROUPS),
    "revoke-delay-lost": named_scenario("revoke-delay-lost", _lost,
                                        "A KIP-983 consumer fenced while it delays a revoke: its partitions lost, "
                                        "every trace allowed.", FAST_GROUPS),
}
