"""The expansion judge on the job's steps (spec/expansion.md, "Trace format extensions"): bad input is malformed with
its line and reason; the group's view judges no positions; a step the model refuses names its clause."""

import json

import pytest

from kipcheck.oracle.check import check_lines

CONFIG = {"initial_partitions": 2, "initial_processors": 2}


def trace(*steps, **config):
    header = {"format": "kipcheck-trace", "version": 1, "machine": "expansion", "config": {**CONFIG, **config}}
    return [json.dumps(header)] + [json.dumps({"step": number, "at_ms": 0, "actor": "a", "op": op, "args": args,
                                               **({"observed": observed[0]} if observed else {})})
                                   for number, (op, args, *observed) in enumerate(steps, 1)]


def read(op, processor=0, partition=0, offset=0, key_hash=0):
    return op, {"processor": processor, "partition": partition, "offset": offset, "key_hash": key_hash}


@pytest.mark.parametrize("lines, line, reason", [
    (trace(catch_up_lag_max=-1), 1, "'catch_up_lag_max' must be >= 0"),
    (trace(view="broker"), 1, "'view' must be one of processors, group"),
    (trace(read("process"), view="group"), 2, "happens inside a processor"),
    (trace(("expand_partitions", {"count": 3}, {"splits": [{"partition": 2, "source": 0}]})), 2,
     "{partition, source, offset} objects"),
    (trace(("expand_partitions", {"count": 3}, {"splits": [{"partition": 2, "source": 0, "offset": 0, "at": 1}]})),
     2, "unknown field 'at'"),
    (trace(("assign", {"processor": 0, "partition": -1, "offset": 0})), 2, "args.partition must be >= 0"),
    (trace(("commit", {"partition": 0, "offset": 0, "processor": "0"})), 2, "args.processor of 'commit' must be"),
    (trace(("ready", {})), 2, "needs args.processor"),
    (trace(("append", {"partition": 0, "key_hash": 0}, {"offset": "0"})), 2, "observed.offset"),
])
def test_malformed(lines, line, reason):
    verdict = check_lines(lines)
    assert verdict.status == "malformed" and verdict.line == line and reason in verdict.reason, verdict.summary()


def test_the_group_view_judges_holders_and_offsets_but_no_positions():
    """A release at 5 with no reads shown: the group cannot know the position (EX-11 is judged where it can)."""
    handover = [("assign", {"processor": 0, "partition": 0, "offset": 0}),
                ("commit", {"partition": 0, "offset": 5, "processor": 0}),
                ("release", {"processor": 0, "partition": 0, "offset": 5})]
    assert check_lines(trace(*handover, view="group")).status == "ok"
    verdict = check_lines(trace(*handover))
    assert (verdict.status, verdict.clause, verdict.step) == ("violation", "EX-11", 2)
    stolen = check_lines(trace(*handover[:2], ("assign", {"processor": 0, "partition": 0, "offset": 5}), view="group"))
    assert (stolen.status, stolen.clause) == ("violation", "EX-8")


def test_a_commit_without_processor_is_what_a_processor_read_and_sets_where_output_goes_on():
    """EX-11: a new processor's trace shows the committed offset it was handed, not who committed it."""
    observed = ("commit", {"partition": 1, "offset": 4})
    assert check_lines(trace(observed, ("assign", {"processor": 1, "partition": 1, "offset": 4}))).status == "ok"
    verdict = check_lines(trace(observed, ("assign", {"processor": 1, "partition": 1, "offset": 0})))
    assert (verdict.status, verdict.clause) == ("violation", "EX-11")
    named = check_lines(trace(("commit", {"partition": 1, "offset": 4, "processor": 1})))
    assert (named.status, named.clause) == ("violation", "EX-11"), "a named processor commits only what it read"
