"""TraceWriter keeps at most `max_open_files` trace files open, and every trace stays whole."""

from __future__ import annotations

import os

from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.tracing import TraceWriter
from kipcheck.oracle.check import check_file


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_groups_hold_a_bounded_number_of_trace_files(tmp_path):
    writer = TraceWriter(tmp_path, ShareConfig(), max_open_files=3)
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
