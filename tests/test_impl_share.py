"""impl/share on its own: config parsing, the durable log, the coordinator's replay, restarts and kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.coordinator import LOG_NAME, ShareCoordinator
from kipcheck.impl.storage.durable_log import DurableLog
from kipcheck.impl.share.partition import ACKNOWLEDGED, ARCHIVED, AVAILABLE, SharePartition
from kipcheck.impl.share.sessions import ShareSessionCache
from kipcheck.impl.share.tracing import TraceWriter
from kipcheck.oracle.check import check_file

KEY = "g1:orders:0"


# Config.

def test_config_reads_kafka_names_from_strings():
    config = ShareConfig.from_properties({
        "group.share.record.lock.duration.ms": "15000", "group.share.delivery.count.limit": " 3 ",
        "group.share.partition.max.record.locks": 100, "share.auto.offset.reset": "earliest"})
    assert (config.record_lock_duration_ms, config.delivery_count_limit, config.max_inflight_records) == (15000, 3, 100)
    assert config.auto_offset_reset == "earliest" and config.profile == "kafka-4.2"
    assert config.trace_config(7) == {"start_offset": 7, "delivery_count_limit": 3,
                                      "record_lock_duration_ms": 15000, "max_inflight_records": 100,
                                      "straddle_npe": "flag"}


@pytest.mark.parametrize("properties, named", [
    ({"group.share.lock.ms": "1"}, "group.share.lock.ms"),
    ({"group.share.delivery.count.limit": "five"}, "group.share.delivery.count.limit"),
    ({"group.share.max.share.sessions": "0"}, "group.share.max.share.sessions"),
    ({"share.auto.offset.reset": "by_duration"}, "share.auto.offset.reset"),
    ({"profile": "kafka-4.1"}, "profile"),
])
def test_a_bad_setting_is_a_value_error_naming_it(properties, named):
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        ShareConfig.from_properties(properties)


# The durable log.

def test_a_torn_tail_is_truncated_and_never_misread(tmp_path):
    path = tmp_path / "state.log"
    log = DurableLog(path, fsync=False)
    log.append(b"one")
    log.append(b"two")
    log.close()
    whole = path.read_bytes()
    for cut in range(len(whole) - 1, len(whole) - len(b"two") - 8, -1):   # every cut inside the last record
        path.write_bytes(whole[:cut])
        reopened = DurableLog(path, fsync=False)
        assert list(reopened.replay()) == [b"one"] and reopened.truncated_bytes > 0
        reopened.append(b"three")
        reopened.close()
        assert list(DurableLog(path, fsync=False).replay()) == [b"one", b"three"]


def test_a_corrupted_record_ends_the_log(tmp_path):
    path = tmp_path / "state.log"
    log = DurableLog(path, fsync=False)
    for payload in (b"first", b"second", b"third"):
        log.append(payload)
    log.close()
    data = bytearray(path.read_bytes())
    data[data.index(b"second")] ^= 0xFF
    path.write_bytes(bytes(data))
    assert list(DurableLog(path, fsync=False).replay()) == [b"first"]


def test_a_file_that_is_not_a_log_is_refused(tmp_path):
    path = tmp_path / "state.log"
    path.write_bytes(b"something else entirely")
    with pytest.raises(ValueError, match="bad magic"):
        DurableLog(path)


# The coordinator.

def batch(first, last, state, count):
    return (first, last, state, count)


@pytest.mark.parametrize("profile", ["kip", "kafka-4.2"])
def test_replay_rebuilds_exactly_the_state_written(tmp_path, profile):
    config = ShareConfig(updates_per_snapshot=3, profile=profile)
    coordinator = ShareCoordinator(tmp_path, config, fsync=False)
    assert coordinator.initialize(KEY, 0, 0) == "NONE"
    for offset in range(12):
        state = (AVAILABLE, ACKNOWLEDGED, ARCHIVED)[offset % 3]
        assert coordinator.write(KEY, 0, -1 if offset % 4 else offset // 2, [batch(offset, offset + 2, state, 1 + offset % 2)]) == "NONE"
    live = coordinator.read(KEY)
    assert live[0] == "NONE" and live[3]
    replayed = ShareCoordinator(tmp_path, config, fsync=False).read(KEY)
    assert replayed == live


def test_kafka_merge_keeps_the_higher_delivery_count_and_kip_the_newer_write(tmp_path):
    answers = {}
    for profile in ("kip", "kafka-4.2"):
        coordinator = ShareCoordinator(tmp_path / profile, ShareConfig(profile=profile), fsync=False)
        coordinator.initialize(KEY, 0, 0)
        coordinator.write(KEY, 0, -1, [batch(0, 4, AVAILABLE, 2)])
        coordinator.write(KEY, 0, -1, [batch(2, 3, AVAILABLE, 1)])
        answers[profile] = coordinator.read(KEY)[3]
    assert answers["kafka-4.2"] == [(0, 4, AVAILABLE, 2)]
    assert answers["kip"] == [(0, 1, AVAILABLE, 2), (2, 3, AVAILABLE, 1), (4, 4, AVAILABLE, 2)]


def test_coordinator_errors():
    import tempfile
    with tempfile.TemporaryDirectory() as directory:
        coordinator = ShareCoordinator(directory, ShareConfig(profile="kip"), fsync=False)
        assert coordinator.read(KEY)[0] == "INVALID_REQUEST"
        assert coordinator.write(KEY, 0, 0, []) == "INVALID_REQUEST"
        assert coordinator.initialize(KEY, 2, 0) == "NONE"
        assert coordinator.initialize(KEY, 1, 0) == "FENCED_STATE_EPOCH"
        assert coordinator.write(KEY, 3, 0, []) == "FENCED_STATE_EPOCH"
        assert coordinator.write(KEY, 2, 0, [batch(0, 0, 1, 1)]) == "INVALID_REQUEST"   # acquired is never persisted


# The partition: batches, not records; one timer.

def test_a_large_batch_stays_one_in_flight_batch_and_one_lock():
    partition = SharePartition(ShareConfig(record_lock_duration_ms=1000, max_inflight_records=10000))
    partition.on_append(0, 5000, 0)
    assert partition.acquire("m1", 500, 10) == [(0, 4999, 1)]          # kafka-4.2: the whole log batch
    assert len(partition._batches) == 1 and partition.next_deadline_ms() == 1010
    assert partition.acknowledge("m1", [(0, 99, "accept"), (100, 199, "release")], 20) == "NONE"
    assert partition.spso == 100 and len(partition._batches) == 2
    assert partition.expire_locks(1009) == 0 and partition.expire_locks(1010) == 4800
    assert partition.next_deadline_ms() is None
    assert partition.states() == [(100, 199, "available", 1), (200, 4999, "available", 1)]


def test_a_batch_sharing_its_first_offset_with_a_renewal_before_it_is_judged_as_any():
    """SP-11, SP-41 (kafka-4.2): batches sharing one offset fail on it, as a transition is pending there, unless
    the batch before renewed it: a renewal starts no transition. (Found by the differential test's random
    scenarios: the broker refused [renew 0-2, release 2-4] where the model allows it.)"""
    partition = SharePartition(ShareConfig(record_lock_duration_ms=1000))
    partition.on_append(0, 5, 0)
    assert partition.acquire("m1", 5, 10) == [(0, 4, 1)]
    assert partition.acknowledge("m1", [(0, 2, "accept"), (2, 4, "release")], 20) == "INVALID_RECORD_STATE"
    assert partition.acknowledge("m1", [(0, 2, "renew"), (2, 4, "release")], 20, renew=True) == "NONE"
    assert partition.states() == [(0, 1, "acquired", 1), (2, 2, "available", 1), (3, 4, "available", 1)]


def test_a_renewal_failing_part_way_keeps_the_records_before_it_renewed():
    """SP-41 (kafka-4.2, as a live Kafka 4.2 answers it): m1 holds 0-4 and releases 3-4; its RENEW of 0-4 fails at 3
    (INVALID_RECORD_STATE), yet 0-2 stay renewed, with the renewal's lock. (Found by the differential test's
    random scenarios: the broker renewed none of a failing batch.)"""
    partition = SharePartition(ShareConfig(record_lock_duration_ms=100))
    partition.on_append(0, 5, 0)
    assert partition.acquire("m1", 5, 0) == [(0, 4, 1)]
    assert partition.acknowledge("m1", [(3, 4, "release")], 10) == "NONE"
    assert partition.acknowledge("m1", [(0, 4, "renew")], 90, renew=True, lock_duration_ms=500) == \
        "INVALID_RECORD_STATE"
    assert partition.expire_locks(100) == 0 and partition.next_deadline_ms() == 590
    assert partition.acknowledge("m1", [(0, 2, "accept")], 120) == "NONE"


def test_kip_acquires_exactly_max_records():
    partition = SharePartition(ShareConfig(profile="kip"))
    partition.on_append(0, 10, 0)
    assert partition.acquire("m1", 4, 0) == [(0, 3, 1)]
    assert partition.acquire("m2", 4, 0) == [(4, 7, 1)]


# Restarts: acknowledged records never come back; acquired, unacknowledged ones do.

def open_partition(data_dir, config, log_end, trace_writer=None, now_ms=0):
    coordinator = ShareCoordinator(data_dir, config)
    partition = SharePartition.load(config, coordinator, KEY, 0, log_end, now_ms, trace_writer=trace_writer)
    if log_end:
        partition.on_append(0, log_end, now_ms)   # the broker replays its log's batches; known offsets are skipped
    return coordinator, partition


def judged_partition_traces(writer):
    """Every share-partition trace `writer` wrote (each incarnation), each passing `kipcheck check`."""
    writer.close()
    traces = [path for path in writer.paths() if path.name.startswith("share-partition.")]
    for trace in traces:
        verdict = check_file(trace)
        assert verdict, verdict.summary()
    return traces


@pytest.mark.parametrize("profile", ["kip", "kafka-4.2"])
def test_restart_from_the_data_dir(tmp_path, profile):
    config = ShareConfig(auto_offset_reset="earliest", profile=profile)
    writer = TraceWriter(tmp_path / "traces", config)
    _, partition = open_partition(tmp_path, config, 0, writer)
    partition.on_append(0, 20, 1)
    assert partition.acquire("m1", 20, 2) == [(0, 19, 1)]
    assert partition.acknowledge("m1", [(0, 4, "accept"), (5, 6, "reject"), (7, 8, "release"), (12, 13, "accept")], 3) == "NONE"
    assert partition.acquire("m2", 2, 4) == [(7, 8, 2)]
    # kill -9 while a write is half done: a torn record at the end of the log
    with open(tmp_path / LOG_NAME, "ab") as log:
        log.write(b"\x00\x00\x01\x00garbage")
    coordinator, partition = open_partition(tmp_path, config, 20, writer, now_ms=5)
    assert coordinator.truncated_bytes > 0
    assert partition.spso == 7
    acquired = partition.acquire("m3", 100, 5)
    offsets = {offset for first, last, _ in acquired for offset in range(first, last + 1)}
    assert offsets == set(range(7, 12)) | set(range(14, 20))
    # 7-8 were released at count 1 (persisted); their second delivery was never persisted, so it is not counted.
    assert (7, 8, 2) in acquired
    assert partition.acknowledge("m3", [(7, 11, "accept")], 6) == "NONE"
    partition.trace_check(7)
    # SP-26: the restarted incarnation's trace starts from the loaded state and is judged.
    traces = judged_partition_traces(writer)
    assert [path.name for path in traces] == ["share-partition.g1%3Aorders%3A0.2.jsonl", "share-partition.g1%3Aorders%3A0.jsonl"]
    header = json.loads(traces[0].read_text().splitlines()[0])
    assert header["config"]["start_offset"] == 7
    assert header["config"]["initial_state"] == [[7, 8, "available", 1], [9, 11, "available", 0],
                                                 [12, 13, "acknowledged", 1]]
    assert '"op":"append","args":{"count":6}' in traces[0].read_text()   # 14-19: the log past the loaded SPEO


WORKER = textwrap.dedent("""
    import sys
    from kipcheck.impl.share.config import ShareConfig
    from kipcheck.impl.share.coordinator import ShareCoordinator
    from kipcheck.impl.share.partition import SharePartition
    config = ShareConfig(auto_offset_reset="earliest")
    coordinator = ShareCoordinator(sys.argv[1], config)
    partition = SharePartition.load(config, coordinator, "g1:orders:0", 0, 0, 0)
    for base in range(0, 100000, 10):
        partition.on_append(base, 10, 0)
    now = 0
    while True:
        now += 1
        for first, last, _ in partition.acquire("m1", 10, now):
            if partition.acknowledge("m1", [(first, last, "accept")], now) == "NONE":
                print(first, last, flush=True)
""")


def test_acknowledged_is_never_redelivered_after_kill_9(tmp_path):
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    killer = threading.Timer(60, worker.kill)   # never hang the suite if the worker stalls
    killer.start()
    acknowledged = []
    try:
        for line in worker.stdout:
            acknowledged.append(tuple(map(int, line.split())))
            if len(acknowledged) >= 30:
                break
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        killer.cancel()
    assert len(acknowledged) >= 30
    config = ShareConfig(auto_offset_reset="earliest")
    writer = TraceWriter(tmp_path / "traces", config)
    _, partition = open_partition(tmp_path, config, 100000, writer)
    highest = max(last for _, last in acknowledged)
    assert partition.spso > highest   # every record the worker saw acknowledged stays acknowledged
    assert partition.acquire("m2", 10, 1)[0][0] >= partition.spso
    partition.trace_check(2)
    assert len(judged_partition_traces(writer)) == 1   # SP-26: the reloaded state, judged


# Sessions and traces.

def test_session_limit_and_release_rules():
    cache = ShareSessionCache(ShareConfig(max_share_sessions=1))
    assert cache.share_fetch("g", "a", 0).error == "NONE"
    assert cache.share_fetch("g", "b", 0).error == "SHARE_SESSION_LIMIT_REACHED"
    assert cache.share_fetch("g", "a", 0).release is False            # kafka-4.2: re-open keeps the records
    assert cache.share_acknowledge("g", "a", 1).error == "NONE"
    assert cache.share_fetch("g", "a", 7).error == "INVALID_SHARE_SESSION_EPOCH"
    closing = cache.share_fetch("g", "a", -1, add=["orders:0"])
    assert closing.error == "NONE" and closing.release and cache.epoch_of("g", "a") is None
    kip = ShareSessionCache(ShareConfig(profile="kip", max_share_sessions=1))
    kip.share_fetch("g", "a", 0)
    assert kip.share_fetch("g", "a", 0).release is True
    assert kip.share_fetch("g", "a", -1, forget=["orders:0"]).error == "INVALID_REQUEST"


def test_a_full_cache_of_another_groups_sessions_is_traced_and_judged_allowed(tmp_path):
    """SS-5: the limit is broker-wide; group h's trace reports g's sessions, so its refusal is judged correct."""
    writer = TraceWriter(tmp_path / "traces", ShareConfig(max_share_sessions=2))
    cache = ShareSessionCache(ShareConfig(max_share_sessions=2), trace_writer=writer)
    assert [cache.share_fetch("g", member, 0, now_ms=1).error for member in ("a", "b")] == ["NONE", "NONE"]
    assert cache.share_fetch("h", "c", 0, now_ms=2).error == "SHARE_SESSION_LIMIT_REACHED"
    assert cache.share_fetch("g", "a", -1, now_ms=3).error == "NONE"
    assert cache.share_fetch("h", "c", 0, now_ms=4).error == "NONE"
    cache.trace_check("h", 5)
    writer.close()
    trace = tmp_path / "traces" / "share-session.h.jsonl"
    assert '"other_sessions":2' in trace.read_text()
    verdict = check_file(trace)
    assert verdict and verdict.steps == 3, verdict.summary()


@pytest.mark.parametrize("profile", ["kafka-4.2", "kip"])
def test_each_process_writes_a_new_share_session_trace_and_closes_are_traced(tmp_path, profile):
    config = ShareConfig(profile=profile)
    for incarnation in range(2):                      # a broker process, then its restart
        writer = TraceWriter(tmp_path / "traces", config)
        cache = ShareSessionCache(config, trace_writer=writer)
        cache.share_fetch("g", "a", 0, add=["orders:0"], now_ms=1)
        cache.share_fetch("g", "b", 0, now_ms=2)
        assert cache.close_member("g", "a", now_ms=3).closed      # SS-17: traced as disconnect
        # No session left: nothing closed, traced only under kafka-4.2 (a close may empty the group, SS-31).
        assert not cache.close_member("g", "a", now_ms=4).closed
        cache.trace_check("g", 5)
        writer.close()
    traces = [tmp_path / "traces" / name for name in ("share-session.g.jsonl", "share-session.g.2.jsonl")]
    assert sorted((tmp_path / "traces").glob("share-session.*.jsonl")) == sorted(traces)
    for trace in traces:
        verdict = check_file(trace)
        assert verdict and verdict.steps == (5 if profile == "kafka-4.2" else 4), verdict.summary()
        assert '"op":"disconnect"' in trace.read_text()


def test_a_resumed_share_state_trace_cuts_a_partial_line_and_judges_the_failover(tmp_path):
    config = ShareConfig()
    writer = TraceWriter(tmp_path / "traces", config)
    coordinator = ShareCoordinator(tmp_path / "data", config, fsync=False, trace_writer=writer, now_ms=5)
    coordinator.initialize(KEY, 0, 0, 5)
    coordinator.write(KEY, 0, -1, [batch(0, 3, ACKNOWLEDGED, 1)], 6)
    writer.close()
    trace = writer.paths()[0]
    with open(trace, "ab") as file:
        file.write(b'{"step": 3, "at_ms"')           # the process died mid-line
    writer = TraceWriter(tmp_path / "traces", config)
    restarted = ShareCoordinator(tmp_path / "data", config, fsync=False, trace_writer=writer, now_ms=9)
    assert restarted.read(KEY, 9)[3] == [(0, 3, ACKNOWLEDGED, 1)]
    writer.close()
    verdict = check_file(trace)
    assert verdict, verdict.summary()
    assert verdict.steps == 4



def test_compaction_rewrites_the_log_without_changing_the_state(tmp_path):
    config = ShareConfig(updates_per_snapshot=1000)
    coordinator = ShareCoordinator(tmp_path, config, fsync=False, compact_bytes=4096)
    coordinator.initialize(KEY, 0, 0)
    for offset in range(300):
        coordinator.write(KEY, 0, offset - 10 if offset % 10 == 0 and offset >= 10 else -1,
                          [batch(offset, offset, ACKNOWLEDGED, 1)])
    assert (tmp_path / LOG_NAME).stat().st_size <= 4096
    assert ShareCoordinator(tmp_path, config, fsync=False).read(KEY) == coordinator.read(KEY)
