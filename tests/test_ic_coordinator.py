"""impl/ic's coordinator, judged by the oracle: its own ic traces pass `kipcheck check`, a restart replays
the same state, every crash point keeps every answered commit, a failed write changes nothing, and seeded
bugs (a compaction that forgets a range, a stable offset that skips an uncommitted record) are caught."""

from __future__ import annotations

import random

import pytest

from kipcheck.impl.ic import logs as logs_module
from kipcheck.impl.ic.config import IcConfig
from kipcheck.impl.ic.coordinator import IcCoordinator
from kipcheck.impl.ic.state import PartitionIc
from kipcheck.model import ic
from kipcheck.oracle.check import check_file

KEY = ("g1", "orders", 0)


def random_request(chooser: random.Random, high: int = 200) -> list[tuple[int, int]]:
    request = []
    for _ in range(chooser.choice([1, 1, 2, 3])):
        first = chooser.randrange(0, high)
        request.append((first, first + chooser.choice([0, 0, 1, 3, 9])))
    return request


def offsets(stable_offset, ranges) -> set[int]:
    return set(range(stable_offset + 1)).union(*(range(first, last + 1) for first, last in ranges))


def verdicts(trace_dir):
    return [check_file(path) for path in sorted(trace_dir.glob("ic.*.jsonl"))]


def assert_traces_pass(trace_dir):
    found = verdicts(trace_dir)
    assert found and all(found), "\n".join(verdict.summary() for verdict in found)


@pytest.mark.parametrize("seed", range(4))
def test_traces_pass_and_restarts_replay_the_same_state(tmp_path, seed):
    """IC-2..IC-9, IC-12: random commits, fetches and restarts; the oracle accepts every step."""
    chooser = random.Random(seed)
    config = IcConfig(max_ranges=chooser.choice([3, 8, 1000]), segment_bytes=chooser.choice([200, 10**7]))
    model = ic.IndividualCommit(max_ranges=config.max_ranges)
    coordinator = IcCoordinator(tmp_path / "data", config, fsync=False, trace_dir=tmp_path / "traces")
    for _ in range(300):
        choice = chooser.random()
        if choice < 0.05:
            before = coordinator.fetch(*KEY)
            coordinator.close()
            coordinator = IcCoordinator(tmp_path / "data", config, fsync=False, trace_dir=tmp_path / "traces")
            assert coordinator.fetch(*KEY) == before, "IC-12: a restart changed the state"
        elif choice < 0.1:
            assert coordinator.fetch(*KEY, member="m1") == tuple_state(model)
        else:
            request = random_request(chooser)
            answer = coordinator.commit(*KEY, request, member=chooser.choice(["m1", "m2"]))
            assert answer.error == model.commit([list(pair) for pair in request]).error
            assert answer.stable_offset == model.stable_offset
    coordinator.close()
    assert_traces_pass(tmp_path / "traces")


def tuple_state(model):
    stable_offset, ranges = model.fetch()
    return stable_offset, [tuple(pair) for pair in ranges]


def test_switch_and_bad_input_answers(tmp_path):
    """IC-7, IC-8: the switch refuses everything first; bad ranges are INVALID_REQUEST, never a traceback."""
    closed = IcCoordinator(tmp_path / "a", IcConfig(accept_individual_commit=False), fsync=False)
    assert closed.commit(*KEY, [(0, 1)]).error == "INDIVIDUAL_COMMIT_NOT_ALLOWED"
    assert closed.commit(*KEY, []).error == "INDIVIDUAL_COMMIT_NOT_ALLOWED"
    coordinator = IcCoordinator(tmp_path / "b", fsync=False, trace_dir=tmp_path / "traces")
    for request in ([], [(5, 4)], [(-1, 3)], [(0, 2**63)], [(1,)], [("a", "b")], [(True, 3)]):
        assert coordinator.commit(*KEY, request).error == "INVALID_REQUEST", request
    assert coordinator.fetch(*KEY) == (-1, []) and coordinator.partitions() == []
    assert coordinator.commit(*KEY, [(0, 2**63 - 1)]).stable_offset == 2**63 - 1
    coordinator.close()
    assert_traces_pass(tmp_path / "traces")


def test_cap_reached_is_an_event_for_the_group_coordinator(tmp_path):
    """IC-6: refused whole at the cap, with the callout; gap filling is still accepted."""
    events = []
    coordinator = IcCoordinator(tmp_path / "data", IcConfig(max_ranges=2), fsync=False, on_cap_reached=events.append)
    coordinator.commit(*KEY, [(1, 1), (3, 3)])
    answer = coordinator.commit(*KEY, [(5, 5)])
    assert answer.error == "MAX_INDIVIDUAL_COMMIT_REACHED" and coordinator.fetch(*KEY) == (-1, [(1, 1), (3, 3)])
    assert [(event.group, event.ranges_held, event.max_ranges) for event in events] == [("g1", 2, 2)]
    assert coordinator.commit(*KEY, [(0, 0)]).error == "NONE" and coordinator.commit(*KEY, [(5, 5)]).error == "NONE"


def test_compaction_keeps_exactly_the_held_ranges(tmp_path):
    """IC-4, IC-12: after compaction the IC log holds one put per held range and replays to the same state."""
    config = IcConfig(segment_bytes=2000)
    coordinator = IcCoordinator(tmp_path / "data", config, fsync=False)
    for offset in range(0, 400, 2):
        coordinator.commit(*KEY, [(offset + 1, offset + 1)])
    for offset in range(100, 200, 2):
        coordinator.commit(*KEY, [(offset, offset)])
    state = coordinator.fetch(*KEY)
    coordinator.compact()
    _, ic_bytes = coordinator.log_sizes_bytes()
    coordinator.close()
    reopened = IcCoordinator(tmp_path / "data", config, fsync=False)
    assert reopened.fetch(*KEY) == state and reopened._logs.ic_records == len(state[1])
    assert ic_bytes < 30 * len(state[1]) + 200


# -- crashes and failed writes ---------------------------------------------------------------------------


class Crash(BaseException):
    """The process dies here (BaseException: nothing in the coordinator may catch it)."""


def crashing_log_class(crash_at: int, after_write: bool):
    """A DurableLog that dies at its `crash_at`-th write (counted over every log), before or after writing."""
    counter = {"writes": 0}

    def crash_point(log, write, tearable=True) -> None:
        counter["writes"] += 1
        if counter["writes"] == crash_at and not after_write:
            raise Crash()
        write()
        if counter["writes"] == crash_at:
            counter["crashed_in"] = log.path if tearable else None
            raise Crash()

    class CrashingLog(logs_module.DurableLog):
        def _write(self, data: bytes) -> None:
            crash_point(self, lambda: super(CrashingLog, self)._write(data))

        def rewrite(self, payloads) -> None:   # compaction: the rename is atomic, so only before or after
            payloads = list(payloads)
            counter["rewrites"] = counter.get("rewrites", 0) + 1
            crash_point(self, lambda: super(CrashingLog, self).rewrite(payloads), tearable=False)

    return CrashingLog, counter


def run_until_crash(data_dir, chooser, log_class) -> tuple[set[int], set[int]]:
    """Commit until the crash; (offsets of answered commits, offsets of every commit asked)."""
    coordinator = IcCoordinator(data_dir, IcConfig(segment_bytes=600), fsync=False)
    answered: set[int] = set()
    asked: set[int] = set()
    try:
        for _ in range(80):
            request = random_request(chooser, 300)
            asked |= offsets(-1, request)
            if coordinator.commit(*KEY, request).error == "NONE":
                answered |= offsets(-1, request)
    except Crash:
        return answered, asked
    return answered, asked


@pytest.mark.parametrize("after_write", [False, True], ids=["before-write", "after-write"])
def test_every_crash_point_keeps_answered_commits_and_resurrects_nothing(tmp_path, monkeypatch, after_write):
    """IC-4, IC-12: a crash at every write (primary, IC, compaction), also one that tears the write in
    progress, loses no answered commit and brings back no offset that was never committed."""
    log_class, counter = crashing_log_class(10**9, after_write)
    monkeypatch.setattr(logs_module, "DurableLog", log_class)
    run_until_crash(tmp_path / "uncrashed", random.Random(1), log_class)
    monkeypatch.undo()
    writes = counter["writes"]
    assert writes > 60 and counter["rewrites"] >= 2, "the crash points must cover many writes and compactions"
    for crash_at in range(1, writes + 1):
        for torn_bytes in ((0, 5) if after_write else (0,)):
            directory = tmp_path / f"{crash_at}-{torn_bytes}"
            log_class, counter = crashing_log_class(crash_at, after_write)
            monkeypatch.setattr(logs_module, "DurableLog", log_class)
            answered, asked = run_until_crash(directory, random.Random(1), log_class)
            monkeypatch.undo()
            torn = counter.get("crashed_in")
            if torn_bytes and torn is not None and torn.exists() and torn.stat().st_size > 8 + torn_bytes:
                with open(torn, "r+b") as file:   # the write in progress reached the disk only in part
                    file.truncate(torn.stat().st_size - torn_bytes)
            stable_offset, ranges = IcCoordinator(directory, fsync=False).fetch(*KEY)
            replayed = offsets(stable_offset, ranges)
            assert answered <= replayed, f"crash at write {crash_at}: lost {sorted(answered - replayed)[:5]}"
            assert replayed <= asked | set(range(stable_offset + 1)) and replayed <= asked, \
                f"crash at write {crash_at}: resurrected {sorted(replayed - asked)[:5]}"


def test_a_failed_write_answers_not_coordinator_and_leaves_files_as_before(tmp_path, monkeypatch):
    """IC-13: the IC log fails after the primary log was written: both files are cut back, nothing changes."""
    coordinator = IcCoordinator(tmp_path / "data", fsync=False, trace_dir=tmp_path / "traces")
    coordinator.commit(*KEY, [(0, 4), (7, 7)])
    files = {path.name: path.read_bytes() for path in (tmp_path / "data").glob("*.log")}
    real_append_many = coordinator._logs.ic.append_many
    monkeypatch.setattr(coordinator._logs.ic, "append_many", _fail)
    answer = coordinator.commit(*KEY, [(5, 6), (9, 9)])           # moves the stable offset: primary written first
    assert answer == type(answer)("NOT_COORDINATOR", 4)
    assert {path.name: path.read_bytes() for path in (tmp_path / "data").glob("*.log")} == files
    assert coordinator.fetch(*KEY) == (4, [(7, 7)])
    monkeypatch.setattr(coordinator._logs.ic, "append_many", real_append_many)
    monkeypatch.setattr(coordinator._logs.primary, "truncate", _fail)
    monkeypatch.setattr(coordinator._logs.ic, "append_many", _fail)
    assert coordinator.commit(*KEY, [(5, 6)]).error == "NOT_COORDINATOR"       # the undo fails too
    monkeypatch.setattr(coordinator._logs.ic, "append_many", real_append_many)
    assert coordinator.commit(*KEY, [(9, 9)]).error == "NOT_COORDINATOR"       # until the undo succeeds
    monkeypatch.undo()
    assert coordinator.commit(*KEY, [(5, 6)]).error == "NONE"
    assert coordinator.fetch(*KEY) == (7, [])
    coordinator.close()
    assert IcCoordinator(tmp_path / "data", fsync=False).fetch(*KEY) == (7, [])
    assert_traces_pass(tmp_path / "traces")


def _fail(*args, **kwargs):
    raise OSError(28, "No space left on device")


# -- seeded bugs the oracle must catch --------------------------------------------------------------------


def test_seeded_bug_compaction_that_forgets_a_range_is_caught(tmp_path, monkeypatch):
    real_rewrite = logs_module.IcLogs.rewrite

    def forgetful_rewrite(self, states):
        forgotten = {}
        for key, (stable_offset, ranges) in states.items():
            kept = type(ranges)()
            for number, (first, last) in enumerate(ranges):
                if number != 1:
                    kept.insert(first, last)
            forgotten[key] = (stable_offset, kept)
        real_rewrite(self, forgotten)

    monkeypatch.setattr(logs_module.IcLogs, "rewrite", forgetful_rewrite)
    coordinator = IcCoordinator(tmp_path / "data", fsync=False, trace_dir=tmp_path / "traces")
    for offset in range(2, 40, 3):
        coordinator.commit(*KEY, [(offset, offset)])
    coordinator.compact()
    coordinator.close()
    IcCoordinator(tmp_path / "data", fsync=False, trace_dir=tmp_path / "traces").close()
    [verdict] = verdicts(tmp_path / "traces")
    assert (verdict.status, verdict.clause) == ("violation", "IC-12"), verdict.summary()


def test_seeded_bug_stable_offset_skipping_an_uncommitted_record_is_caught(tmp_path, monkeypatch):
    real_plan = PartitionIc.plan

    def skipping_plan(self, request):
        plan = real_plan(self, request)
        spans = plan.spans
        if plan.folded is None and spans and spans[0].first == self.stable_offset + 2:   # one record short
            return type(plan)(spans[0].last, [pair for pair in plan.puts if pair[0] != spans[0].first],
                              plan.tombstones, spans, spans[0], plan.ranges_after - 1)
        return plan

    monkeypatch.setattr(PartitionIc, "plan", skipping_plan)
    coordinator = IcCoordinator(tmp_path / "data", fsync=False, trace_dir=tmp_path / "traces")
    for request in ([(0, 4)], [(8, 9)], [(6, 6)]):   # the last leaves 5 uncommitted
        coordinator.commit(*KEY, request)
    coordinator.close()
    [verdict] = verdicts(tmp_path / "traces")
    assert (verdict.status, verdict.clause) == ("violation", "IC-3"), verdict.summary()


# -- a real kill -9 ---------------------------------------------------------------------------------------


def test_kill_9_at_random_moments_loses_no_answered_commit(tmp_path):
    """IC-12 with real processes: a coordinator (fsync on) is killed -9 mid-run three times on one data dir;
    every commit it answered NONE survives, and no offset appears that no commit asked for."""
    import json
    import signal
    import subprocess
    import sys

    answered: set[int] = set()
    asked: set[int] = set()
    for round_number in range(3):
        child = subprocess.Popen([sys.executable, __file__, str(tmp_path / "data"), str(round_number)],
                                 stdout=subprocess.PIPE, text=True)
        stop_after = random.Random(round_number).randrange(20, 60)
        for line in child.stdout:
            if not line.endswith("\n"):
                break   # the kill cut this line short: its commit was never asked, or its answer never told
            kind, request = line.split(" ", 1)
            pairs = json.loads(request)
            (asked if kind == "ask" else answered).update(offsets(-1, pairs))
            if kind == "ok":
                stop_after -= 1
                if stop_after == 0:
                    child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        assert child.returncode == -signal.SIGKILL
        stable_offset, ranges = IcCoordinator(tmp_path / "data", fsync=False).fetch(*KEY)
        replayed = offsets(stable_offset, ranges)
        assert answered <= replayed, f"round {round_number}: lost {sorted(answered - replayed)[:5]}"
        assert replayed <= asked, f"round {round_number}: resurrected {sorted(replayed - asked)[:5]}"


def _commit_forever(data_dir: str, seed: int) -> None:
    """The killed process: commits random ranges, printing each before asking and after a NONE answer."""
    import json

    chooser = random.Random(seed)
    coordinator = IcCoordinator(data_dir, IcConfig(segment_bytes=4096), fsync=True)
    while True:
        request = random_request(chooser, 2000)
        print("ask", json.dumps(request), flush=True)
        if coordinator.commit(*KEY, request).error == "NONE":
            print("ok", json.dumps(request), flush=True)


if __name__ == "__main__":
    import sys

    _commit_forever(sys.argv[1], int(sys.argv[2]))
