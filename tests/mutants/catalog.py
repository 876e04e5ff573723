"""Seeded rule bugs (mutants) in copies of the models, and the runner that measures whether they are caught.

A mutant patches one rule of a model for the duration of a `with` block
(module attributes and methods, restored afterwards; the model files are never
edited). `run_mutant` runs the named hypothesis state machines (fast profile)
and the named `kipcheck prove` theorem families against it and reports which
killed it and how long that took. Used by tests/test_mutations.py and
bench/mutation_report.py; loaded by file path (tests/ is not a package).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hypothesis import Phase, Verbosity, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from kipcheck.model import expansion, ic, key_range_assign, revoke_delay, share_partition, share_session, share_state
from kipcheck.model.errors import Error
from kipcheck.oracle import proofs

MACHINES = Path(__file__).resolve().parent.parent / "machines"


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str
    patches: tuple[tuple[object, str, object], ...]  # (owner, attribute, replacement)
    machine: str  # tests/machines/test_<machine>_machine.py
    proof_family: str | None = None  # kipcheck.oracle.proofs.<family>, when a theorem covers the rule


@contextlib.contextmanager
def applied(mutant: Mutant):
    saved = [(owner, attribute, getattr(owner, attribute)) for owner, attribute, _ in mutant.patches]
    try:
        for owner, attribute, replacement in mutant.patches:
            setattr(owner, attribute, replacement)
        yield
    finally:
        for owner, attribute, original in reversed(saved):
            setattr(owner, attribute, original)


# The rule bugs. Each replacement is the model's rule with one thing wrong.

# The share-partition mutants touch as little of the model's insides as they can (the method names below,
# `_spso` and the constructor's settings), so that they keep meaning the same bug when the model is refactored.
_acquire_run = share_partition.SharePartition._acquire_run
_advance_start = share_partition.SharePartition._advance_start
_release_record = share_partition.SharePartition._release_record


def _acquire_without_increment(self, first, last, count, actor, deadline):
    _acquire_run(self, first, last, count - 1, actor, deadline)  # SP-4 broken: the stored count is not incremented


def _advance_start_past_acquired(self):
    _advance_start(self)
    while self._spso < self._speo and self.state_of(self._spso) == share_partition.ACQUIRED:
        self._spso += 1  # SP-23 broken: an acquired record counts as done


def _release_never_archives(self, *args):
    saved, self.delivery_count_limit = self.delivery_count_limit, 10**9  # SP-21 broken: no archive at the limit
    try:
        _release_record(self, *args)
    finally:
        self.delivery_count_limit = saved


def _leave_keeps_records(self, at_ms, actor):
    self.advance(at_ms)  # SP-22 broken: the actor's records stay acquired


def _incremental_without_epoch_check(self, member, epoch, clause, add=frozenset(), forget=frozenset()):
    session = self.by_member.get(member)
    if session is None:
        return share_session.Answer(Error.SHARE_SESSION_NOT_FOUND, "SS-6")
    # SS-7 broken: the request epoch is not compared with the cached one.
    self.by_member[member] = share_session.Session(share_session.next_epoch(session.epoch), (session.partitions | add) - forget)
    return share_session.Answer(Error.NONE, clause, acknowledges=True)


def _merge_ignoring_adjacency(ranges):
    merged = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1]:  # IC-2 broken: touching ranges stay apart
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return tuple(merged)


def _normal_form_without_advance(stable_offset, ranges):
    # IC-3 broken: the stable offset never advances over a range that touches it.
    return stable_offset, ic.merge((max(first, stable_offset + 1), last) for first, last in ranges if last > stable_offset)


def _delay_revoke_after_loss(self, partitions):
    delayed = set(partitions) & self.revoke_next  # RD-9 broken: no check that the partitions are still owned
    self.revoke_next -= delayed
    self.revoke_thereafter |= delayed
    return True


def _revoke_completes_at_once(self, partitions):
    self.owned -= set(partitions)  # RD-2/RD-3 broken: the revoke completes when requested, not at a poll start


def _overlapping_split(k):
    shares = _split(k)
    return [(low, min(high + 1, key_range_assign.HASH_MAX)) for low, high in shares]  # KR-2 broken: shares overlap


_split = key_range_assign.split
_linear_hash = expansion.linear_hash


def _linear_hash_off_by_one(value, buckets, initial_buckets):
    modulus = initial_buckets
    while modulus * 2 <= buckets:
        modulus *= 2
    bucket = value % modulus
    if bucket <= buckets - modulus:  # EX-2 broken: one bucket too many uses the next level
        bucket = value % (modulus * 2)
    return bucket


_replay = share_state.replay


def _replay_ignoring_last_update(log, profile, deltas_per_checkpoint=None):
    records = list(log)
    if records and isinstance(records[-1], share_state.Delta):
        records = records[:-1]  # ST-11/ST-12 broken: the newest update is not replayed
    return _replay(records, profile, deltas_per_checkpoint)


def _acknowledge_by_anyone(self, *args):
    return None  # SP-15 broken: records not acquired by the actor may be acknowledged


def _mismatch_drops_session(self, member, epoch, clause, add=frozenset(), forget=frozenset()):
    session = self.by_member.get(member)
    if session is not None and session.epoch != epoch:
        del self.by_member[member]  # SS-15 broken: a refused request changes the cache
        return share_session.Answer(Error.INVALID_SHARE_SESSION_EPOCH, "SS-7")
    return _incremental(self, member, epoch, clause, add, forget)


_incremental = share_session.ShareSessionCache._incremental


def _close_keeps_session(self, member):
    if member not in self.by_member:
        return share_session.Answer(Error.SHARE_SESSION_NOT_FOUND, "SS-6")
    return share_session.Answer(Error.NONE, "SS-12", acknowledges=True, releases=True)  # SS-12 broken


def _clip_ignoring_start_offset(batches, start_offset):
    return batches  # ST-6 broken: state below the start offset is kept


def _older_write_wins(rules, new, old):
    return False  # ST-7 broken: an earlier write wins over a later one


def _appends_without_tombstones(before, after):
    return [record for record in _compaction_appends(before, after) if "tombstone" not in record]  # IC-4 broken


_compaction_appends = ic.compaction_appends


def _too_old_accepted(self, ranges):
    request = [tuple(pair) for pair in ranges]
    if request and all(last <= self.stable_offset for _, last in request) and all(0 <= f <= l for f, l in request):
        return self._answer(Error.NONE)  # IC-5 broken: a commit at or below the stable offset is accepted
    return _commit(self, ranges)


_commit = ic.IndividualCommit.commit


def _poll_keeping_lost(self):
    lost = set(self.lost)
    result = _poll(self)
    self.lost |= lost  # RD-5 broken: the lost list is not emptied at the start of the poll
    return revoke_delay.PollResult(result.revoked, result.to_be_revoked, frozenset(self.lost), result.fetchable)


_poll = revoke_delay.RevokeDelayConsumer.poll


def _delay_revoke_partial(self, partitions):
    delayed = set(partitions) & self.revoke_next & self.owned  # RD-9 broken: not all or nothing
    self.revoke_next -= delayed
    self.revoke_thereafter |= delayed
    return set(partitions) <= self.owned


def _topic_setting_ignored(self, topic):
    return self.coordinator_allows_ic  # KR-4 broken: the topic's accept.range.fetch is ignored


def _opt_out_ignored(self, topic):
    return self.subscribers(topic)  # KR-4 broken: members that disallow key share are split too


def _processors_past_partitions(self, count):
    if count < self.processors:
        raise expansion.Violation("EX-4", f"a processor count >= {self.processors}", f"count={count}")
    self.processors = count  # EX-3 broken: more processors than partitions accepted


def _never_undrained(partition, positions, splits, sources=None):
    return None  # EX-6 broken: a new partition is read before its source is drained


def _rebuild_any_key(self, processor, partition, offset, home):
    return None  # EX-9 to EX-11 broken: any processor may build state of any key, anywhere, without output


def _epoch_without_wraparound(epoch):
    return epoch + 1  # SS-9 broken: the epoch after Integer.MAX_VALUE is not 1


def _cap_ignored(self, ranges):
    saved, self.max_ranges = self.max_ranges, 10**9  # IC-6 broken: the cap on held ranges is not enforced
    try:
        return _commit(self, ranges)
    finally:
        self.max_ranges = saved


def _acquire_with_long_lock(self, at_ms, actor, max_records, records):
    saved, self.record_lock_duration_ms = self.record_lock_duration_ms, 2 * self.record_lock_duration_ms
    try:
        _acquire(self, at_ms, actor, max_records, records)  # SP-20 broken: the lock lasts twice as long
    finally:
        self.record_lock_duration_ms = saved


_acquire = share_partition.SharePartition.acquire


CATALOG = (
    Mutant("sp-count-not-incremented", "delivery count not incremented on acquire (SP-4)",
           ((share_partition.SharePartition, "_acquire_run", _acquire_without_increment),), "share_partition", "share_partition_bmc"),
    Mutant("sp-spso-past-acquired", "SPSO advanced past an acquired record (SP-23)",
           ((share_partition.SharePartition, "_advance_start", _advance_start_past_acquired),), "share_partition", "share_partition_bmc"),
    Mutant("sp-release-at-limit-available", "release at the delivery limit not archiving (SP-21)",
           ((share_partition.SharePartition, "_release_record", _release_never_archives),), "share_partition", "share_partition_bmc"),
    Mutant("sp-leave-keeps-records", "leave does not release the actor's records (SP-22)",
           ((share_partition.SharePartition, "leave", _leave_keeps_records),), "share_partition", "share_partition_bmc"),
    Mutant("ss-epoch-not-checked", "session epoch not checked (SS-7)",
           ((share_session.ShareSessionCache, "_incremental", _incremental_without_epoch_check),), "share_session"),
    Mutant("ic-merge-ignores-adjacency", "IC merge ignoring adjacency (IC-2)",
           ((ic, "merge", _merge_ignoring_adjacency),), "ic", "ic_merge"),
    Mutant("ic-stable-not-advanced", "stable offset not advanced (IC-3)",
           ((ic, "normal_form", _normal_form_without_advance),), "ic", "ic_merge"),
    Mutant("rd-delay-after-loss", "delayRevoke accepted after loss (RD-9)",
           ((revoke_delay.RevokeDelayConsumer, "delay_revoke", _delay_revoke_after_loss),), "revoke_delay"),
    Mutant("rd-revoke-at-once", "revoke completed when requested, not at the start of a poll (RD-2/RD-3)",
           ((revoke_delay.RevokeDelayConsumer, "revoke", _revoke_completes_at_once),), "revoke_delay"),
    Mutant("kr-overlapping-ranges", "overlapping key ranges (KR-2)",
           ((key_range_assign, "split", _overlapping_split),), "key_range_assign", "key_range_split"),
    Mutant("ex-moving-key", "linear hashing off by one: expansion moves keys (EX-2)",
           ((expansion, "linear_hash", _linear_hash_off_by_one),), "expansion", "linear_hashing"),
    Mutant("st-replay-ignores-update", "replay ignoring the newest update (ST-11/ST-12)",
           ((share_state, "replay", _replay_ignoring_last_update),), "share_state"),
    Mutant("sp-ack-by-non-owner", "acknowledgement of records the actor does not hold (SP-15)",
           ((share_partition.SharePartition, "_not_owned_error", _acknowledge_by_anyone),), "share_partition",
           "share_partition_bmc"),
    Mutant("ss-refusal-drops-session", "an epoch mismatch drops the session (SS-15)",
           ((share_session.ShareSessionCache, "_incremental", _mismatch_drops_session),), "share_session"),
    Mutant("ss-final-keeps-session", "a final request does not close the session (SS-12)",
           ((share_session.ShareSessionCache, "_close", _close_keeps_session),), "share_session"),
    Mutant("st-start-offset-ignored", "state below the start offset kept (ST-6)",
           ((share_state, "_clip", _clip_ignoring_start_offset),), "share_state"),
    Mutant("st-older-write-wins", "an earlier write wins (ST-7)",
           ((share_state.KipRules, "new_wins", _older_write_wins),), "share_state"),
    Mutant("ic-no-tombstones", "compaction writes no tombstones (IC-4)",
           ((ic, "compaction_appends", _appends_without_tombstones),), "ic"),
    Mutant("ic-too-old-accepted", "a commit at or below the stable offset accepted (IC-5)",
           ((ic.IndividualCommit, "commit", _too_old_accepted),), "ic"),
    Mutant("rd-lost-kept", "the lost list not emptied at the start of a poll (RD-3/RD-5)",
           ((revoke_delay.RevokeDelayConsumer, "poll", _poll_keeping_lost),), "revoke_delay"),
    Mutant("rd-delay-partial", "delayRevoke not all or nothing (RD-9)",
           ((revoke_delay.RevokeDelayConsumer, "delay_revoke", _delay_revoke_partial),), "revoke_delay"),
    Mutant("kr-topic-setting-ignored", "split on a topic that disallows sharing (KR-4)",
           ((key_range_assign.Group, "sharing_allowed", _topic_setting_ignored),), "key_range_assign"),
    Mutant("kr-opt-out-ignored", "split given to a member that disallows sharing (KR-4)",
           ((key_range_assign.Group, "opting_in", _opt_out_ignored),), "key_range_assign"),
    Mutant("ex-processors-past-partitions", "more processors than partitions accepted (EX-3)",
           ((expansion.Expansion, "expand_processors", _processors_past_partitions),), "expansion"),
    Mutant("ex-drain-ignored", "a new partition read before its source is drained (EX-6)",
           ((expansion, "undrained", _never_undrained),), "expansion"),
    Mutant("ex-rebuild-anything", "state rebuilt for any key, at any offset (EX-9)",
           ((expansion.Expansion, "_check_rebuild", _rebuild_any_key),), "expansion"),
    Mutant("ss-no-wraparound", "the epoch after Integer.MAX_VALUE is not 1 (SS-9)",
           ((share_session, "next_epoch", _epoch_without_wraparound),), "share_session"),
    Mutant("ic-cap-ignored", "the cap on held ranges not enforced (IC-6)",
           ((ic.IndividualCommit, "commit", _cap_ignored),), "ic"),
    # No theorem covers it: the bounded model check abstracts the clock (any lock may expire at any step).
    Mutant("sp-lock-too-long", "acquisition lock twice the configured duration (SP-20)",
           ((share_partition.SharePartition, "acquire", _acquire_with_long_lock),), "share_partition"),
)


def _load(path: Path, name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def machine_class(machine: str) -> type[RuleBasedStateMachine]:
    _load(MACHINES / "conftest.py", "kipcheck_machines_conftest")  # registers the profiles
    module = _load(MACHINES / f"test_{machine}_machine.py", f"kipcheck_machine_{machine}")
    return next(value for value in vars(module).values()
                if isinstance(value, type) and issubclass(value, RuleBasedStateMachine) and value is not RuleBasedStateMachine)


def fast_settings() -> settings:
    """The fast profile, quiet, stopping at the first failure without shrinking: the time to kill is the time to find."""
    machine_class("expansion")  # make sure the profiles are registered
    return settings(settings.get_profile("kipcheck-machines-fast"), verbosity=Verbosity.quiet, print_blob=False,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate), report_multiple_bugs=False)


@dataclass
class Verdict:
    mutant: Mutant
    machine_killed: bool
    machine_seconds: float
    machine_reason: str
    proof_killed: bool | None  # None: no theorem covers this rule
    proof_seconds: float


def _run_machine(mutant: Mutant) -> tuple[bool, float, str]:
    started = time.perf_counter()
    try:
        run_state_machine_as_test(machine_class(mutant.machine), settings=fast_settings())
    except Exception as failure:  # noqa: BLE001 - any failure of the machine is a kill; the reason is reported
        reason = f"{type(failure).__name__}: {str(failure).splitlines()[0] if str(failure) else ''}"
        return True, time.perf_counter() - started, reason[:110]
    return False, time.perf_counter() - started, "survived"


def _run_proofs(mutant: Mutant) -> tuple[bool | None, float]:
    """Whether some theorem of the family fails, and the time until the first one does (or all ran)."""
    if mutant.proof_family is None:
        return None, 0.0
    family = importlib.import_module(f"kipcheck.oracle.proofs.{mutant.proof_family}")
    started = time.perf_counter()
    killed = any(not proofs.run(theorem).ok for theorem in family.THEOREMS)
    return killed, time.perf_counter() - started


def run_mutant(mutant: Mutant) -> Verdict:
    with applied(mutant):
        killed, seconds, reason = _run_machine(mutant)
        proof_killed, proof_seconds = _run_proofs(mutant)
    return Verdict(mutant, killed, seconds, reason, proof_killed, proof_seconds)


def table(verdicts: list[Verdict]) -> str:
    """The kill table: one line per seeded bug, saying plainly whether the suite caught it."""
    width = max(len(verdict.mutant.bug) for verdict in verdicts)
    lines = ["Seeded bugs: each line is a bug put on purpose into a copy of one model rule. CAUGHT means the",
             "suite detected it: the hypothesis state machine failed (and `kipcheck prove` too, where a theorem",
             "covers the rule); MISSED would mean the suite cannot tell the broken rule from the right one.",
             f"{'':<7} {'seeded bug':<30} {'the bug':<{width}} {'machine':<17} {'s':>6}  {'prove':<9} {'s':>6}  "
             f"first failing check"]
    for verdict in verdicts:
        proof = {None: "n/a", True: "caught", False: "MISSED"}[verdict.proof_killed]
        lines.append(f"{'CAUGHT' if verdict.machine_killed else 'MISSED':<7} {verdict.mutant.name:<30} "
                     f"{verdict.mutant.bug:<{width}} {verdict.mutant.machine:<17} {verdict.machine_seconds:6.2f}  "
                     f"{proof:<9} {verdict.proof_seconds:6.2f}  {verdict.machine_reason}")
    caught = sum(verdict.machine_killed for verdict in verdicts)
    covered = [verdict for verdict in verdicts if verdict.proof_killed is not None]
    lines.append(f"the suite caught {caught} of {len(verdicts)} seeded bugs ({100 * caught / len(verdicts):.0f}%); "
                 f"kipcheck prove caught {sum(v.proof_killed for v in covered)} of the {len(covered)} its theorems cover")
    return "\n".join(lines)
