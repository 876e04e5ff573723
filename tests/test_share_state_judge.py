"""The share-state judge: bad trace input exits 2 with a reason; read answers are compared offset by offset."""

import json

import pytest

from kipcheck.oracle.check import check_lines

HEADER = {"format": "kipcheck-trace", "version": 1, "machine": "share-state"}
INIT = {"op": "initialize", "args": {"state_epoch": 0, "start_offset": 0}, "observed": {"error": "NONE"}}


def trace(*steps, profile="kip", config=None):
    header = {**HEADER, "profile": profile, **({"config": config} if config else {})}
    numbered = [{"step": n, "at_ms": n, "actor": "leader", **step} for n, step in enumerate(steps, start=1)]
    return [json.dumps(header)] + [json.dumps(step) for step in numbered]


def write(*batches, start_offset=-1):
    return {"op": "write", "args": {"state_epoch": 0, "start_offset": start_offset, "batches": list(batches)}}


def batch(first, last, state="available", delivery_count=1):
    return {"first": first, "last": last, "state": state, "delivery_count": delivery_count}


@pytest.mark.parametrize("lines, reason", [
    (trace(INIT, write(batch(5, 4))), "0 <= first <= last"),
    (trace(INIT, write(batch(-1, 4))), "0 <= first <= last"),
    (trace(INIT, write(batch(0, 4, delivery_count=-1))), "delivery_count >= 0"),
    (trace(INIT, write(batch(0, 4, state="acked"))), "a state in"),
    (trace(INIT, write({"first": 0, "last": 1})), "{first, last, state, delivery_count}"),
    (trace(INIT, write(start_offset=-2)), "an offset or -1"),
    (trace(INIT, {"op": "read", "observed": {"batches": [{"first": 0}]}}), "observed.batches"),
    (trace(INIT, config={"deltas_per_checkpoint": 257}), "0..256"),
    (trace(INIT, config={"deltas_per_checkpoint": "5"}), "deltas_per_checkpoint"),
    (trace(INIT, config={"deltas_per_checkpoint": 257}, profile="kafka-4.2"), None),
])
def test_malformed_input_is_reported_not_judged(lines, reason):
    verdict = check_lines(lines)
    if reason is None:
        assert verdict.status == "ok", verdict.summary()
    else:
        assert verdict.status == "malformed" and reason in verdict.reason, verdict.summary()


def test_read_batches_are_compared_offset_by_offset_not_by_runs():
    read = {"op": "read", "observed": {"error": "NONE", "batches": [batch(0, 1), batch(2, 4)]}}
    assert check_lines(trace(INIT, write(batch(0, 2), batch(3, 4)), read)).status == "ok"


def test_read_fields_are_not_judged_when_the_answer_is_an_error():
    read = {"op": "read", "observed": {"error": "INVALID_REQUEST", "state_epoch": 99, "batches": [batch(0, 0)]}}
    assert check_lines(trace(read)).status == "ok"
