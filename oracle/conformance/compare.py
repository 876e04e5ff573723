"""Two brokers, the same runs: what the clients saw and what each run left behind, compared observation by observation.

    comparison = compare_runs(reference_runs, kafka_runs, reference_scenarios, kafka_scenarios)
    print(comparison.render("embedded", "kafka:4.2"))
    comparison.unexplained                                  # differences no rule of spec/conformance.md allows

Each probe run wrote the same traces on both sides (its scenario or swarm seed fixes the requests, as long as
the answers agree). Their steps are walked side by side: what was asked (op and args, with the probe's topic
names, which hold a random group id, made the same) and what was answered (each observed field). Then what the
run left behind, read from the outside once it was over (outside.py: groups, members, stored and committed
offsets, log offsets), subject by subject; the same for each client scenario that ran on both sides. A
difference is either allowed by a normalisation rule (spec/conformance.md, "Comparing two brokers": N-1 timing,
N-2 which records an acquisition took, N-3 the start offset stored before the first write, N-4 member ids, which
outside.py leaves out, N-5 a lock that expired before a different step on each side), or unexplained: an answer
that differs where both cannot be right, to be fixed in the reference broker or recorded as a finding. Once a
trace's requests differ (the probe acted on a different answer), the rest of it is not compared.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# Difference class -> the normalisation rule that allows it (spec/conformance.md); classes absent are unexplained.
ALLOWED = {
    "acquired other records (each allowed by the model)": "N-2",
    "stored start offset before the first write": "N-3",
    "answered differently after a lock expired before it on one side only": "N-5",
    "after the run, an epoch differs by what the group epoch does": "N-6",
    "after the run, another member was assigned a partition": "N-7",
}
OTHER_MEMBER_ASSIGNED = "after the run, another member was assigned a partition"
ASSIGNMENTS = ("share member assignment", "consumer member assignment")
EPOCHS_FROM_THE_GROUP_EPOCH = "after the run, an epoch differs by what the group epoch does"
# Difference class -> the finding of spec/kafka-findings.md that explains it (Kafka breaks the KIP there).
FINDINGS = {"after a broker restart, the share group's members differ":
            "Kafka keeps a share group's members across a restart"}
MEMBERS_KEPT_OVER_A_RESTART = "after a broker restart, the share group's members differ"
MEMBERSHIP = ("share group size", "share group epoch", "share group assignment epoch", "share member epoch",
              "share member subscription", "share member assignment")
# The epochs N-6 compares as differences from their group's epoch.
EPOCHS = tuple(f"{protocol} {what}" for protocol in ("share", "consumer")
               for what in ("group epoch", "group assignment epoch", "member epoch"))
LOCK_EXPIRED_ON_ONE_SIDE = "answered differently after a lock expired before it on one side only"
GROUP_ID = re.compile(r"(kipcheck-[a-z0-9-]+?)-[0-9a-f]{8}")   # a probe's group id: its name, then random


@dataclass
class Comparison:
    compared: int = 0                              # observations compared (N-1: times never are)
    equal: int = 0
    classes: Counter = field(default_factory=Counter)   # difference class -> count
    examples: dict[str, str] = field(default_factory=dict)  # difference class -> its first occurrence
    diverged: int = 0                              # traces whose requests parted, after a difference
    unmatched: list[str] = field(default_factory=list)   # runs or traces only one side has

    @property
    def unexplained(self) -> int:
        return sum(count for name, count in self.classes.items() if name not in ALLOWED and name not in FINDINGS) \
            + len(self.unmatched)

    def note(self, name: str, where: str) -> None:
        self.classes[name] += 1
        self.examples.setdefault(name, where)

    def render(self, left: str, right: str) -> str:
        normalised = sum(count for name, count in self.classes.items() if name in ALLOWED)
        found = sum(count for name, count in self.classes.items() if name in FINDINGS)
        lines = [f"\n{left} against {right}: {self.compared} observations compared, {self.equal} equal, "
                 f"{normalised} normalised by a rule, {found} explained by a finding, {self.unexplained} unexplained"]
        for name, count in self.classes.most_common():
            status = f"allowed ({ALLOWED[name]})" if name in ALLOWED else "finding" if name in FINDINGS \
                else "UNEXPLAINED"
            lines.append(f"  {count:>6}  {status:<14} {name}\n          first: {self.examples[name]}")
            if name in FINDINGS:
                lines.append(f"          spec/kafka-findings.md: {FINDINGS[name]}")
        lines += [f"  {'':>6}  UNEXPLAINED    only one side has {name}" for name in self.unmatched]
        if self.diverged:
            lines.append(f"  {self.diverged} traces compared up to where the probe's requests parted")
        return "\n".join(lines)


def compare_runs(left_runs: list, right_runs: list, left_scenarios: list = (), right_scenarios: list = ()) -> Comparison:
    """Probe runs (ProbeRun) by name: their traces, then what each left behind; client scenarios (ScenarioResult)
    that ran on both sides by name: what each left behind."""
    comparison = Comparison()
    right_scenario = {result.name: result for result in right_scenarios if not result.skipped}
    for left in left_scenarios:
        right = right_scenario.get(left.name)
        if right is not None and not left.skipped:
            _compare_outside(left.name, left.observations, right.observations, comparison)
    right_by_name = {run.name: run for run in right_runs}
    for left in left_runs:
        right = right_by_name.get(left.name)
        if right is None or bool(right.paths) != bool(left.paths):
            comparison.unmatched.append(f"the run {left.name}")
            continue
        right_paths = {_trace_key(path): path for path in right.paths}
        parted = False
        for path in left.paths:
            if _trace_key(path) in right_paths:
                parted |= _compare_traces(path, right_paths[_trace_key(path)], comparison)
        one_side = sorted({_trace_key(path) for path in left.paths} ^ set(right_paths))
        if parted:  # once the probe acted on an answer that differed, it may have made other traces
            comparison.diverged += len(one_side)
        else:
            comparison.unmatched += [f"the trace {name}" for name in one_side]
        _compare_outside(left.name, left.observations, right.observations, comparison)
    return comparison


def _compare_outside(name: str, left: dict[str, dict], right: dict[str, dict], comparison: Comparison) -> None:
    """What each side's run left behind, seen from outside (outside.py): kind by kind, subject by subject."""
    if not left and not right:
        return
    if not left or not right:
        comparison.unmatched.append(f"the outside view after the run {name}")
        return
    left, right = _normalised(left), _normalised(right)
    left_epochs, right_epochs = _epochs_from_the_group_epoch(left), _epochs_from_the_group_epoch(right)
    for kind in sorted(set(left) | set(right)):
        mine_by_subject, theirs_by_subject = left.get(kind, {}), right.get(kind, {})
        for subject in sorted(set(mine_by_subject) | set(theirs_by_subject)):
            comparison.compared += 1
            mine, theirs = mine_by_subject.get(subject), theirs_by_subject.get(subject)
            if mine == theirs:
                comparison.equal += 1
            elif kind in MEMBERSHIP and any(left.get("broker restarts", {}).values()):
                comparison.note(MEMBERS_KEPT_OVER_A_RESTART, f"{name}: {kind} of {subject} {json.dumps(mine)} "
                                                             f"against {json.dumps(theirs)}")
            elif kind in ASSIGNMENTS and _assigned(left, kind, subject) == _assigned(right, kind, subject):
                comparison.note(OTHER_MEMBER_ASSIGNED, f"{name}: {kind} of {subject} {json.dumps(mine)} "
                                                       f"against {json.dumps(theirs)}")
            elif kind in EPOCHS and left_epochs.get((kind, subject)) == right_epochs.get((kind, subject)):
                comparison.note(EPOCHS_FROM_THE_GROUP_EPOCH, f"{name}: {kind} of {subject} {json.dumps(mine)} "
                                                             f"against {json.dumps(theirs)}")
            else:
                comparison.note(f"after the run, {kind} differs",
                                f"{name}: {kind} of {subject} {json.dumps(mine)} against {json.dumps(theirs)}")


def _assigned(view: dict[str, dict], kind: str, subject: str) -> set[str]:
    """N-7: the partitions assigned to any member of the group of the member `subject`."""
    group = subject.rsplit(" ", 1)[0]
    return {partition for member, partitions in view.get(kind, {}).items()
            if member.rsplit(" ", 1)[0] == group for partition in partitions or ()}


def _epochs_from_the_group_epoch(view: dict[str, dict]) -> dict[tuple[str, str], int]:
    """N-6: each epoch of a group, less the group epoch (the group epoch itself: 0), by (kind, subject)."""
    relative = {}
    for kind in EPOCHS:
        protocol = kind.split()[0]
        group_epochs = view.get(f"{protocol} group epoch", {})
        for subject, epoch in view.get(kind, {}).items():
            group = subject if "group" in kind else subject.rsplit(" ", 1)[0]
            if isinstance(epoch, int) and group in group_epochs:
                relative[(kind, subject)] = epoch - group_epochs[group]
    return relative


def _trace_key(path: Path) -> str:
    return path.name


def _steps(path: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return lines[0], lines[1:]


def _normalised(value):
    """The random part of the probe's group ids (in topic names too) left out on both sides."""
    return json.loads(GROUP_ID.sub(r"\1", json.dumps(value)))


def _compare_traces(left_path: Path, right_path: Path, comparison: Comparison) -> bool:
    """Walk the two traces side by side; True when the probe's requests parted (the rest is not compared)."""
    (left_header, left_steps), (right_header, right_steps) = _steps(left_path), _steps(right_path)
    expiries = zip(_expiries(left_header, left_steps), _expiries(right_header, right_steps))
    written = False  # a state write happened (SP-47) before this step, on the left side's trace
    for left, right, (left_expired, right_expired) in zip(left_steps, right_steps, expiries):
        where = f"{left_path.name} step {left['step']}"
        if (left["op"], left["actor"], _normalised(left["args"])) != (right["op"], right["actor"],
                                                                       _normalised(right["args"])):
            comparison.diverged += 1
            return True
        left_observed, right_observed = left.get("observed") or {}, right.get("observed") or {}
        acquired_differs = left_observed.get("records") != right_observed.get("records")
        for name in sorted(set(left_observed) | set(right_observed)):
            comparison.compared += 1
            mine, theirs = left_observed.get(name), right_observed.get(name)
            if _normalised(mine) == _normalised(theirs):
                comparison.equal += 1
            elif left_expired != right_expired:
                comparison.note(LOCK_EXPIRED_ON_ONE_SIDE, f"{where}: {name} {json.dumps(mine)} against "
                                                          f"{json.dumps(theirs)}")
            else:
                comparison.note(_difference_class(left["op"], name, mine, theirs, written, acquired_differs),
                                f"{where}: {name} {json.dumps(mine)} against {json.dumps(theirs)}")
        written = written or left["op"] == "leave" or (  # a renewal writes nothing (SP-41, SP-47)
            left["op"] == "acknowledge" and (left.get("observed") or {}).get("error") == "NONE"
            and any(batch["type"] != "renew" for batch in left["args"]["batches"]))
    if len(left_steps) != len(right_steps):
        comparison.diverged += 1
        return True
    return False


def _expiries(header: dict, steps: list[dict]) -> list[int]:
    """For each step of a share-partition trace, how many times locks had expired before it (SP-20), on its side's
    own clock, as the model replays the trace; zeros for other machines."""
    from kipcheck.oracle.conformance.probes.probe import replay

    if header.get("machine") != "share-partition":
        return [0] * len(steps)
    counts, expired = [], 0
    for index, step in enumerate(steps):
        model, _ = replay(header, steps[:index])
        before = model.snapshot()
        model.advance(step["at_ms"])
        expired += model.snapshot() != before
        counts.append(expired)
    return counts


def _difference_class(op: str, name: str, mine, theirs, written: bool, acquired_differs: bool) -> str:
    if (op, name) in (("acquire", "records"), ("share_fetch", "acquired_in")) or \
            (op, name) == ("acquire", "delivered") and acquired_differs:
        # N-2: where the fetch acquired (SS-19) and the records sent (SP-48) follow from what it acquired.
        return "acquired other records (each allowed by the model)"
    if op == "check" and name == "stored_spso" and not written and -1 in (mine, theirs):
        return "stored start offset before the first write"
    return f"{op} answered {name} differently"
