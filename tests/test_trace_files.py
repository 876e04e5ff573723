"""A TraceWriter over a storage that keeps few files open keeps every trace whole; long keys get hashed names."""

from __future__ import annotations

import os

from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.tracing import TraceWriter
from kipcheck.impl.storage import Storage
from kipcheck.oracle.check import check_file


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_groups_hold_a_bounded_number_of_trace_files(tmp_path):
    writer = TraceWriter(tmp_path, ShareConfig(), storage=Storage(open_files_max=3))
    before = open_descriptors()
    traces = [writer.sessions(f"group-{index}") for index in range(20)]
    for round_number in range(3):  # every trace written in turn: each write may reopen its file
        for trace in traces:
            epoch = [0, 1, -1][round_number]  # open, fetch, close: each answered NONE
            trace.share_fetch(round_number, "m1", epoch, [], [], [], "NONE")
            assert open_descriptors() - before <= 3
    writer.close()
    assert open_descriptors() == before
    for trace in traces:
        lines = trace.path.read_text().splitlines()
        assert len(lines) == 4 and '"step":3' in lines[-1]
        assert check_file(trace.path).status == "ok", check_file(trace.path).summary()


def test_keys_too_long_for_a_file_name_get_a_hashed_name_and_come_back(tmp_path):
    config = ShareConfig()
    group, topic = "g" * 300, "t." * 124 + "t"  # a 300-character group and a legal 249-character topic
    key = f"{group}:{topic}:0"
    writer = TraceWriter(tmp_path, config)
    writer.state(key, {"deltas_per_checkpoint": 500}).step(1, "leader", "initialize",
                                                            {"state_epoch": 0, "start_offset": 0}, {"error": "NONE"})
    writer.sessions(group).share_fetch(1, "m1", 0, [f"{topic}:0"], [], [], "NONE")
    writer.close()
    assert all(len(path.name) <= 255 for path in tmp_path.iterdir())
    assert TraceWriter(tmp_path, config).state_keys() == [key]  # a new process finds the key again
    assert all(check_file(path).status == "ok" for path in tmp_path.glob("*.jsonl"))
