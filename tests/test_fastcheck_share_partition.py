"""The fast acceptor (oracle/judges/fast/share_partition.py) gives the plain model's verdicts.

Hypothesis writes share-partition traces by driving the plain model, new or
reloaded from a random `initial_state` (SP-26): appends, allowed acquisitions (the lowest one or any allowed set), acknowledgements good
and bad and failing on storage (SP-27), time jumps, leaves, ticks and checks, under every profile (Kafka 4.4's
group configs changing and dead-letter queue, SP-70..SP-74, included). The fast
judge and the reference judge (`kipcheck check --reference`) must give every
trace, and every corruption of one field of it, the same verdict in the same
words: status, step, clause, what was allowed and observed (or line and
reason, for malformed input). The same holds for every example.
A deliberately broken fast acceptor fails this very check.
"""

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings, strategies as st

from kipcheck.model import share_partition as model
from kipcheck.model.errors import Error
from kipcheck.model.profiles import KAFKA_44, is_kafka
from kipcheck.model.violation import STORAGE_ERRORS
from kipcheck.oracle.check import check_file, check_lines
from kipcheck.oracle.judges.fast import share_partition as fastcheck

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "oracle" / "examples" / "share-partition").rglob("*.jsonl"))
ACTORS = ("c1", "c2", "c3")
ERRORS = (Error.NONE, Error.INVALID_REQUEST, Error.INVALID_RECORD_STATE, Error.REQUEST_TIMED_OUT, "COORDINATOR_NOT_AVAILABLE",
          "UNKNOWN_SERVER_ERROR")
LOG_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
KAFKA44_STATES = model.RULES[KAFKA_44].states  # SP-73: archiving too
DIFFERENTIAL = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def verdicts(lines):
    """(fast, reference) verdicts, each as (status, step, clause, line, the words: allowed, observed, reason)."""
    fast, reference = check_lines(lines), check_lines(lines, reference=True)
    return tuple((verdict.status, verdict.step, verdict.clause, verdict.line, verdict.allowed, verdict.observed,
                  verdict.reason) for verdict in (fast, reference))


def assert_same_verdicts(lines):
    fast, reference = verdicts(lines)
    assert fast == reference, "fast acceptor and model disagree on:\n" + "\n".join(lines)


def disagree(trace):
    fast, reference = verdicts(trace.lines())
    return fast != reference


class TraceWriter:
    """Drives the plain model with hypothesis' choices and records every step as the model saw it."""

    def __init__(self, data, profile):
        self.data = data
        self.config = {"start_offset": data.draw(st.integers(0, 3)), "delivery_count_limit": data.draw(st.integers(1, 3)),
                       "record_lock_duration_ms": data.draw(st.integers(1, 40)),
                       "max_inflight_records": data.draw(st.integers(1, 12))}
        if data.draw(st.booleans()):  # SP-40: Kafka 4.2's failure on a batch straddling SPSO, flagged
            self.config["straddle_npe"] = "flag"
        self.kafka = is_kafka(profile)
        if profile == KAFKA_44:  # SP-72, SP-73: the group refuses renewals, has a dead-letter queue
            self.config.update({key: data.draw(st.booleans()) for key in ("renew_acknowledge_enable", "dead_letter_queue")})
        if data.draw(st.booleans()):  # SP-26: a partition reloaded after a restart
            self.config["initial_state"] = data.draw(initial_states(self.config["start_offset"],
                                                                    self.config["delivery_count_limit"],
                                                                    model.RULES[profile].loadable_states))
        if self.kafka and data.draw(st.booleans()):  # SP-62, SP-63
            self.config["isolation_level"] = data.draw(st.sampled_from(LOG_ISOLATION_LEVELS))
        self.profile = profile
        self.partition = model.SharePartition(**self.config, profile=profile)
        self.first_appended = None  # the first offset appended in this trace
        self.at_ms = 0
        self.steps = []

    def emit(self, actor, op, args=None, observed=None):
        step = {"step": len(self.steps) + 1, "at_ms": self.at_ms, "actor": actor, "op": op}
        if args is not None:
            step["args"] = args
        if observed is not None:
            step["observed"] = observed
        self.steps.append(step)

    def one_step(self):
        draw = self.data.draw
        previous_ms = self.at_ms
        self.at_ms += draw(st.sampled_from((0, 0, 1, 5, self.config["record_lock_duration_ms"])))
        ops = ("append", "acquire", "acquire", "acknowledge", "acknowledge", "leave", "tick", "check")
        if self.kafka:  # SP-61..SP-65: Kafka's log
            ops += ("transaction", "transaction", "log_start", "compact")
        if self.profile == KAFKA_44:  # SP-70, SP-74: a group's configs change, phase 2 of a dead-letter queue
            ops += ("alter_config", "dead_lettered", "dead_lettered")
        op = draw(st.sampled_from(ops))
        actor = draw(st.sampled_from(ACTORS))
        # SP-44: an acknowledgement received earlier than answered, its records' locks held back meanwhile.
        self.received_ms = None
        if op == "acknowledge" and self.kafka and draw(st.booleans()):
            self.received_ms = draw(st.integers(previous_ms, self.at_ms))
        # SP-20: what the judge does first at every step.
        self.partition.advance(self.at_ms if self.received_ms is None else self.received_ms)
        getattr(self, op)(actor)

    def append(self, _actor):
        count = self.data.draw(st.integers(1, 5))
        self._mark_appended()
        self.partition.append(count)
        self.emit("producer", "append", {"count": count})

    def acquire(self, actor):
        max_records = self.data.draw(st.integers(1, 6))
        record_limit = self.data.draw(st.booleans())  # SP-42: Kafka 4.2's record_limit acquire mode
        archived = None
        if self.kafka or self.data.draw(st.booleans()):
            records = self.partition.lowest_acquisition(max_records, record_limit)
            if self.kafka and self.data.draw(st.booleans()):  # SP-63: observed, else inferred
                archived = self.partition.lowest_archived(max_records, record_limit)
        else:  # SP-3: any ascending set of acquirable records
            records = self._any_acquisition(max_records)
        args = {"max_records": max_records}
        if record_limit:
            args["acquire_mode"] = "record_limit"
        self._lock_duration(args)
        observed = {"records": copy.deepcopy(records)}
        if archived is not None:
            observed["archived"] = copy.deepcopy(archived)
        self.emit(actor, "acquire", args, observed)
        self.partition.acquire(self.at_ms, actor, max_records, records, record_limit, archived)

    def transaction(self, _actor):
        """SP-61: a transactional append, or the end of a producer's transaction."""
        producer = self.data.draw(st.sampled_from(("p1", "p2")))
        if self.partition.log.has_open_transaction(producer) and self.data.draw(st.booleans()):
            result = self.data.draw(st.sampled_from(("commit", "abort")))
            self._mark_appended()
            self.partition.end_transaction(producer, result)
            self.emit(producer, "end_transaction", {"producer": producer, "result": result})
        else:
            count = self.data.draw(st.integers(1, 4))
            self._mark_appended()
            self.partition.append(count, producer)
            self.emit(producer, "append", {"count": count, "producer": producer})

    def alter_config(self, _actor):
        """SP-70: the group's configs change (to test-sized values); nothing changes at once."""
        draw = self.data.draw
        values = {"delivery_count_limit": st.integers(1, 3), "max_inflight_records": st.integers(1, 12),
                  "renew_acknowledge_enable": st.booleans(), "dead_letter_queue": st.booleans()}
        keys = draw(st.lists(st.sampled_from(model.GROUP_CONFIG_KEYS), min_size=1, max_size=2, unique=True))
        settings = {key: draw(values[key]) for key in keys}
        self.partition.alter_config(settings)
        self.emit("admin", "alter_config", settings)

    def dead_lettered(self, _actor):
        """SP-74: phase 2 finished for part of a run of archiving records."""
        runs = self.partition.archiving_runs()
        if not runs:
            return self.tick(_actor)
        first, last = self.data.draw(st.sampled_from(runs))
        first = self.data.draw(st.integers(first, last))
        last = self.data.draw(st.integers(first, last))
        self.partition.dead_lettered(first, last)
        self.emit("dead-letter-queue", "dead_lettered", {"first": first, "last": last})

    def _mark_appended(self):
        if self.first_appended is None:
            self.first_appended = self.partition.log_end_offset

    def log_start(self, _actor):
        """SP-64: the log start offset moves (or is learnt at or below SPSO, which changes nothing)."""
        offset = self.data.draw(st.integers(max(0, self.partition.spso - 1), self.partition.log_end_offset))
        self.partition.move_log_start(self.at_ms, offset)
        self.emit("retention", "log_start", {"offset": offset})

    def compact(self, _actor):
        """SP-65: compaction removed whole log batches: one to three of those appended."""
        batches = self._appended_batches()
        if not batches:
            return self.tick(_actor)
        index = self.data.draw(st.integers(0, len(batches) - 1))
        first, _ = batches[index]
        _, last = batches[self.data.draw(st.integers(index, min(index + 2, len(batches) - 1)))]
        self.partition.compact(self.at_ms, first, last)
        self.emit("cleaner", "compact", {"first": first, "last": last})

    def _appended_batches(self):
        """(first, last) of the log batches appended in this trace (the loaded log's batches are not known)."""
        batches, offset = [], self.first_appended
        while offset is not None and offset < self.partition.log_end_offset:
            batches.append(self.partition.log_batch_of(offset))
            offset = batches[-1][1] + 1
        return batches

    def _any_acquisition(self, max_records):
        offsets = [offset for first, last in self.partition.acquirable_ranges() for offset in range(first, last + 1)]
        chosen = sorted(self.data.draw(st.sets(st.sampled_from(offsets), max_size=max_records))) if offsets else []
        runs = []
        for offset in chosen:
            count = self.partition.delivery_count_of(offset) + 1 if offset < self.partition.speo else 1
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, count])
        return runs

    def acknowledge(self, actor):
        partition = self.partition
        low, high = max(0, partition.spso - 2), partition.speo + 2
        owners = sorted({partition.owner_of(offset) for offset in range(partition.spso, partition.speo)} - {None})
        batches = []
        if owners and self.data.draw(st.booleans()):  # records their owner holds: the paths that succeed
            actor = self.data.draw(st.sampled_from(owners))
            held = [offset for offset in range(partition.spso, partition.speo) if partition.owner_of(offset) == actor]
            first = last = self.data.draw(st.sampled_from(held))
            while last + 1 in held and self.data.draw(st.booleans()):
                last += 1
            batches.append((first, last, self.data.draw(st.sampled_from(model.ACK_TYPES))))
        for _ in range(self.data.draw(st.sampled_from((0, 0, 1)) if batches else st.integers(1, 3))):
            first = self.data.draw(st.integers(low, high))
            last = first + self.data.draw(st.integers(-1, 3))
            batches.append((first, max(last, 0), self.data.draw(st.sampled_from(model.ACK_TYPES))))
        renew = self.data.draw(st.booleans())  # SP-41: the request announced renewals
        args = {"batches": [{"first": f, "last": l, "type": t} for f, l, t in batches]}
        self._lock_duration(args)
        if self.received_ms is None and self.data.draw(st.integers(0, 5)) == 0:  # SP-27: the write failed
            self.partition.storage_failure(self.at_ms, actor, batches, renew)
            error = self.data.draw(st.sampled_from(sorted(STORAGE_ERRORS)))
        else:
            error = self.partition.acknowledge(self.at_ms, actor, batches, renew, self.received_ms).value
        if self.received_ms is not None:
            args["received_ms"] = self.received_ms
        if renew:
            args["renew"] = True
        self.emit(actor, "acknowledge", args, {"error": error})

    def _lock_duration(self, args):
        """SP-46: now and then the group's lock duration differs from the header's for this step."""
        lock_duration_ms = None
        if self.data.draw(st.integers(0, 3)) == 0:
            lock_duration_ms = args["lock_duration_ms"] = self.data.draw(st.integers(1, 80))
        self.partition.lock_duration_ms = lock_duration_ms

    def leave(self, actor):
        self.partition.leave(self.at_ms, actor)
        self.emit(actor, "leave")

    def tick(self, _actor):
        self.emit("clock", "tick")

    def check(self, _actor):
        partition = self.partition
        if partition.archiving_runs() and self.data.draw(st.booleans()):  # SP-74: phase 2 seen only by the check
            for first, last in partition.archiving_runs():
                partition.dead_lettered(first, last)
        self.emit("observer", "check", None, {"spso": partition.spso, "speo": partition.speo, "states": partition.snapshot()})

    def lines(self, steps=None, config=None):
        config = self.config if config is None else config
        if self.kafka:  # SP-45, SP-71: test-sized settings, outside Kafka's ranges
            config = {**config, "kafka_ranges": "waive"}
        header = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": self.profile,
                  "config": config}
        return [json.dumps(header)] + [json.dumps(step) for step in (self.steps if steps is None else steps)]


@st.composite
def initial_states(draw, start_offset, delivery_count_limit, loadable=model.LOADABLE_STATES):
    """SP-26: ascending runs [first, last, state, delivery_count] from start_offset, holes between some."""
    runs, first = [], start_offset
    for _ in range(draw(st.integers(0, 4))):
        first += draw(st.sampled_from((0, 0, 1, 2)))
        last = first + draw(st.integers(0, 3))
        runs.append([first, last, draw(st.sampled_from(loadable)), draw(st.integers(0, delivery_count_limit))])
        first = last + 1
    return runs


@st.composite
def valid_traces(draw, profiles=model.PROFILES):
    writer = TraceWriter(draw(st.data()), draw(st.sampled_from(profiles)))
    for _ in range(draw(st.integers(1, 40))):
        writer.one_step()
    return writer


def _nudge(draw, value):
    return value + draw(st.sampled_from((-2, -1, 1, 2)))


def corrupt(draw, steps):
    """One observed field or one arg of one step changed, or time jumping forward from one step on."""
    index = draw(st.integers(0, len(steps) - 1))
    step = steps[index]
    op, args, observed = step["op"], step.get("args", {}), step.get("observed", {})
    choice = draw(st.integers(0, 2))
    if choice == 0 and op in ("acquire", "acknowledge", "leave"):
        step["actor"] = draw(st.sampled_from([actor for actor in ACTORS if actor != step["actor"]]))
    elif op == "append":
        args["count"] = max(1, _nudge(draw, args["count"]))
    elif op == "end_transaction":
        args["result"] = "commit" if args["result"] == "abort" else "abort"
    elif op == "log_start":
        args["offset"] = max(0, _nudge(draw, args["offset"]))
    elif op == "compact":
        args["last"] = max(args["first"], _nudge(draw, args["last"]))
    elif op == "dead_lettered":
        name = draw(st.sampled_from(("first", "last")))
        args[name] = max(0, _nudge(draw, args[name]))
    elif op == "alter_config":
        name = draw(st.sampled_from(sorted(args)))
        args[name] = not args[name] if type(args[name]) is bool else max(1, _nudge(draw, args[name]))
    elif op == "acquire" and observed.get("archived") and choice == 2:
        run = draw(st.sampled_from(observed["archived"]))
        run[draw(st.integers(0, 1))] = max(0, _nudge(draw, run[0]))
    elif op == "acquire" and observed["records"] and choice == 1:
        run = draw(st.sampled_from(observed["records"]))
        field = draw(st.integers(0, 2))
        run[field] = max(0, _nudge(draw, run[field]))
    elif op == "acquire" and choice == 2 and draw(st.booleans()):
        args["acquire_mode"] = "batch_optimized" if args.get("acquire_mode") == "record_limit" else "record_limit"
    elif op == "acquire":
        args["max_records"] = max(1, _nudge(draw, args["max_records"]))
    elif op == "acknowledge" and choice == 2 and draw(st.booleans()):
        args["renew"] = not args.get("renew", False)
    elif op == "acknowledge" and choice == 1:
        observed["error"] = draw(st.sampled_from([error for error in ERRORS if error != observed["error"]]))
    elif op == "acknowledge":
        batch = draw(st.sampled_from(args["batches"]))
        name = draw(st.sampled_from(("first", "last", "type")))
        batch[name] = draw(st.sampled_from(model.ACK_TYPES)) if name == "type" else max(0, _nudge(draw, batch[name]))
    elif op == "check" and observed["states"] and choice == 1:
        run = draw(st.sampled_from(observed["states"]))
        field = draw(st.integers(0, 3))
        run[field] = draw(st.sampled_from(KAFKA44_STATES)) if field == 2 else max(0, _nudge(draw, run[field]))
    elif op == "check":
        name = draw(st.sampled_from(("spso", "speo")))
        observed[name] = max(0, _nudge(draw, observed[name]))
    else:  # leave, tick: time jumps forward before this step, so locks expire sooner
        jump_ms = draw(st.integers(1, 50))
        for later in steps[index:]:
            later["at_ms"] += jump_ms


@given(trace=valid_traces())
@DIFFERENTIAL
def test_fast_and_reference_agree_on_generated_traces(trace):
    assert check_lines(trace.lines(), reference=True), "the model rejected a trace it wrote"
    assert not disagree(trace), "fast acceptor and model disagree on:\n" + "\n".join(trace.lines())


@given(trace=valid_traces(), data=st.data())
@DIFFERENTIAL
def test_fast_and_reference_agree_on_corrupted_traces(trace, data):
    steps, config = copy.deepcopy(trace.steps), copy.deepcopy(trace.config)
    if config.get("initial_state") and data.draw(st.integers(0, 4)) == 0:
        run = data.draw(st.sampled_from(config["initial_state"]))  # SP-26: one loaded field changed
        field = data.draw(st.integers(0, 3))
        run[field] = data.draw(st.sampled_from(KAFKA44_STATES)) if field == 2 else _nudge(data.draw, run[field])
    else:
        corrupt(data.draw, steps)
    assert_same_verdicts(trace.lines(steps, config))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_fast_and_reference_agree_on_every_example(path):
    fast, reference = check_file(path), check_file(path, reference=True)
    assert fast.summary() == reference.summary()


def test_examples_were_found():
    assert len(EXAMPLES) >= 10 and any("violations" in path.parts for path in EXAMPLES)


# The differential check can fail: fast acceptors with one rule broken.

class CountNotIncremented(fastcheck.SharePartition):
    def _acquire_run(self, first, last, count, actor, deadline):
        super()._acquire_run(first, last, count - 1, actor, deadline)  # SP-4 broken


class StartPassesAvailableRecord(fastcheck.SharePartition):
    def _advance_start(self):
        super()._advance_start()
        if self._spso < self._speo and self.state_of(self._spso) == model.AVAILABLE:
            self._spso += 1  # SP-23 broken: SPSO passes a non-terminal record


class LoadForgetsDeliveryCounts(fastcheck.SharePartition):
    def _load(self, runs):
        super()._load([(first, last, state, 0) for first, last, state, _ in runs])  # SP-26 broken


class LogStartKeepsAvailableRecords(fastcheck.SharePartition):
    def move_log_start(self, at_ms, offset):
        self.log.start_offset = max(self.log.start_offset, offset)  # SP-64 broken: SPSO stays
        self.log.used = True
        self.advance(at_ms)


class CompactionArchivesNothing(fastcheck.SharePartition):
    def compact(self, at_ms, first, last):
        self.advance(at_ms)
        self.log.remove(first, last)  # SP-65 broken: available records of the range stay available


class AbortedRecordsNotArchived(fastcheck.SharePartition):
    def _archive_aborted(self, runs):
        pass  # SP-63 broken: records of aborted transactions are neither archived nor in the window


KAFKA42_LOG_BUGS = (LogStartKeepsAvailableRecords, CompactionArchivesNothing, AbortedRecordsNotArchived)


class LimitReadOnce(fastcheck.SharePartition):
    def alter_config(self, settings):
        super().alter_config({key: value for key, value in settings.items() if key != "delivery_count_limit"}
                             or {"dead_letter_queue": self.dead_letter_queue})  # SP-70 broken: the limit never changes


class RenewalsNeverRefused(fastcheck.SharePartition):
    def acknowledge(self, at_ms, actor, batches, renew=False, received_ms=None):
        enabled, self.renew_acknowledge_enable = self.renew_acknowledge_enable, True  # SP-72 broken
        try:
            return super().acknowledge(at_ms, actor, batches, renew, received_ms)
        finally:
            self.renew_acknowledge_enable = enabled


class RejectSkipsTheDeadLetterQueue(fastcheck.SharePartition):
    def _apply_acknowledgement(self, first, last, target):
        super()._apply_acknowledgement(first, last, model.ARCHIVED if target is model.ARCHIVING else target)  # SP-73


class DeadLetteringArchivesNothing(fastcheck.SharePartition):
    def dead_lettered(self, first, last, seen_later=False):
        pass  # SP-74 broken: phase 2 leaves the records archiving


KAFKA44_BUGS = (LimitReadOnce, RenewalsNeverRefused, RejectSkipsTheDeadLetterQueue, DeadLetteringArchivesNothing)


@pytest.mark.parametrize("broken", (CountNotIncremented, StartPassesAvailableRecord, LoadForgetsDeliveryCounts,
                                    *KAFKA42_LOG_BUGS, *KAFKA44_BUGS),
                         ids=lambda cls: cls.__name__)
def test_a_broken_fast_acceptor_is_caught(broken, monkeypatch):
    """The generated-traces check above, run against the broken acceptor, finds a trace they disagree on."""
    monkeypatch.setattr(fastcheck, "SharePartition", broken)
    # Kafka's log (SP-61..SP-65) exists only under its profiles, a group's configs and dead-letter queue
    # (SP-70..SP-74) only under kafka-4.4: search there for the bugs in them.
    profiles = ("kafka-4.2",) if broken in KAFKA42_LOG_BUGS else (KAFKA_44,) if broken in KAFKA44_BUGS \
        else model.PROFILES
    found = find(valid_traces(profiles), disagree, settings=settings(DIFFERENTIAL, max_examples=3000, phases=[Phase.generate],
                                                             database=None))
    assert disagree(found)


def test_reference_flag_judges_with_the_model(monkeypatch):
    """--reference really uses the model: break the model and only the reference verdict changes."""
    lines = [json.dumps({"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": "kip"}),
             json.dumps({"step": 1, "at_ms": 0, "actor": "p", "op": "append", "args": {"count": 2}}),
             json.dumps({"step": 2, "at_ms": 0, "actor": "c1", "op": "acquire", "args": {"max_records": 1},
                         "observed": {"records": [[0, 1, 1]]}})]
    assert [verdict[:4] for verdict in verdicts(lines)] == [("violation", 2, "SP-5", None)] * 2
    monkeypatch.setattr(model.SharePartition, "check_acquisition",
                        lambda self, max_records, records, record_limit, archived=None: None)
    assert [verdict[:4] for verdict in verdicts(lines)] == [("violation", 2, "SP-5", None), ("ok", None, None, None)]


def test_the_fast_per_record_lists_follow_the_window_not_the_trace():
    partition = fastcheck.SharePartition()
    for at_ms in range(20000):
        partition.append(5)
        partition.acquire(at_ms, "c1", 5, [[at_ms * 5, at_ms * 5 + 4, 1]])
        partition.acknowledge(at_ms, "c1", [(at_ms * 5, at_ms * 5 + 4, "accept")])
    assert partition.spso == 100000 and len(partition._state) < 5000
