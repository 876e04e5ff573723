"""kipcheck conform --html: every counterexample's picture shows its failing step, in the lane of the member that
took it, with what was observed against what the model allowed; a share-partition's shows whose records they were."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.counterexample import read_counterexample
from kipcheck.oracle.conformance.picture import FAILED, OFFSETS_MAX, STEPS_MAX, picture, write_html
from kipcheck.oracle.examples import examples

SVG = "{http://www.w3.org/2000/svg}"
HEADER = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": "kip",
          "config": {"record_lock_duration_ms": 30000}}


def write_trace(path: Path, *steps: dict) -> Path:
    lines = [HEADER] + [{"step": number, **step} for number, step in enumerate(steps, 1)]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def double_delivery(tmp_path: Path) -> Path:
    """bob acquires offset 4 while alice holds it: SP-3."""
    return write_trace(tmp_path / "double.jsonl",
                       {"at_ms": 0, "actor": "log", "op": "append", "args": {"count": 10}},
                       {"at_ms": 10, "actor": "alice", "op": "acquire", "args": {"max_records": 5},
                        "observed": {"records": [[0, 4, 1]]}},
                       {"at_ms": 20, "actor": "bob", "op": "acquire", "args": {"max_records": 5},
                        "observed": {"records": [[4, 8, 1]]}})


def drawn(svg: str) -> tuple[list[str], list[str]]:
    """(the texts of the picture, the tooltips of its boxes drawn in red: the failing step's)."""
    root = ElementTree.fromstring(svg)
    texts = ["".join(text.itertext()) for text in root.iter(f"{SVG}text")]
    failing = [group.find(f"{SVG}title").text for group in root.iter(f"{SVG}g")
               if group.find(f"{SVG}rect").get("stroke") == FAILED]
    return texts, failing


def test_a_double_delivery_is_drawn_in_the_second_members_lane_and_names_both_members(tmp_path):
    trace = double_delivery(tmp_path)
    verdict = check_file(trace)
    assert (verdict.clause, verdict.step) == ("SP-3", 3)
    example = read_counterexample(trace.read_text().splitlines(), STEPS_MAX)
    assert example.actors() == ["log", "alice", "bob"], "one lane per member"
    texts, failing = drawn(picture(example, "double"))
    assert failing == ["bob: acquire max_records=5 → records=[[4, 8, 1]]"], "the failing step, in bob's lane"
    caption = [text for text in texts if "breaks SP-3" in text]
    assert caption == ["step 3 breaks SP-3: bob acquire max_records=5 → records=[[4, 8, 1]]"]
    assert any(text.startswith("the model allowed: available records only (record 4 is acquired by alice, locked until")
               for text in texts)
    # The record grid's failing column shows the state the step met (alice's run) and bob's claim on it.
    assert "bob acquired" in texts and texts.count("alice") >= 3   # her lane, her run after step 2 and at step 3
    report = tmp_path / "report.html"
    write_html(report, "the table", [(verdict, trace)])
    page = report.read_text()
    assert page.count("<svg") == 1 and "<p><b>step 3 breaks SP-3: bob acquire" in page


def test_the_picture_is_the_failing_steps_not_the_last_steps(tmp_path):
    """Steps after the failing one are left out; a long trace is drawn from STEPS_MAX steps before it."""
    appends = [{"at_ms": 0, "actor": "log", "op": "append", "args": {"count": 1}} for _ in range(STEPS_MAX + 5)]
    failing = {"at_ms": 1, "actor": "carol", "op": "acquire", "args": {"max_records": 1},
               "observed": {"records": [[0, 0, 2]]}}  # a first delivery counted as the second: SP-4
    after = {"at_ms": 2, "actor": "dave", "op": "leave", "args": {}}
    trace = write_trace(tmp_path / "long.jsonl", *appends, failing, after)
    example = read_counterexample(trace.read_text().splitlines(), STEPS_MAX)
    assert example.failing is not None and example.failing.clause == check_file(trace).clause
    assert [step.actor for step in example.steps][-1] == "carol" and "dave" not in example.actors()
    assert len(example.steps) == STEPS_MAX + 1 and example.skipped == 5
    assert drawn(picture(example, "long"))[1] == ["carol: acquire max_records=1 → records=[[0, 0, 2]]"]


def test_an_acknowledgement_far_past_the_log_is_drawn_around_its_first_records(tmp_path):
    """A hostile range up to 2^31 - 1 is drawn as at most OFFSETS_MAX offsets, its first ones, and quickly."""
    trace = write_trace(tmp_path / "far.jsonl",
                        {"at_ms": 0, "actor": "log", "op": "append", "args": {"count": 500}},
                        {"at_ms": 1, "actor": "alice", "op": "acquire", "args": {"max_records": 500},
                         "observed": {"records": [[0, 499, 1]]}},
                        {"at_ms": 2, "actor": "bob", "op": "acknowledge",
                         "args": {"batches": [{"first": 300, "last": 2**31 - 1, "type": "accept"}]},
                         "observed": {"error": "NONE"}})
    assert check_file(trace).clause == "SP-13"
    texts, failing = drawn(picture(read_counterexample(trace.read_text().splitlines(), STEPS_MAX), "far"))
    assert failing == [f"bob: acknowledge batches=[300-{2**31 - 1} accept] → error=NONE"]
    offsets = [int(text) for text in texts if text.isdigit()]
    assert 300 in offsets and len(offsets) <= OFFSETS_MAX
    assert "bob accept" in texts and texts.count("alice") >= 3, "her run named in each column, where it is drawn"


@pytest.mark.parametrize("example", [example for example in examples() if example.expected_clause],
                         ids=lambda example: example.path.name)
def test_every_machines_counterexample_gets_a_picture_of_its_failing_step(example):
    verdict = check_file(example.path)
    counterexample = read_counterexample(example.path.read_text().splitlines(), STEPS_MAX)
    texts, failing = drawn(picture(counterexample, example.path.name))
    assert counterexample.failing is not None and counterexample.failing.clause == example.expected_clause
    assert any(text.startswith(("step", "the header")) and f"breaks {example.expected_clause}" in text for text in texts)
    assert f"the model allowed: {verdict.allowed}" in " ".join(texts)
    if verdict.step == 0:  # the header's settings broke the clause: no step to draw
        assert failing == []
        return
    step = counterexample.steps[-1]
    assert step.number == verdict.step
    lanes = [lane for lane, _, _ in counterexample.entries(step)]
    assert failing and [box.split(":")[0] for box in failing] == lanes, "each failing box in its member's lane"
    assert set(lanes) <= set(counterexample.actors()) and set(lanes) <= set(texts)


def test_every_machine_has_a_counterexample_drawn():
    machines = {example.machine for example in examples() if example.expected_clause}
    assert machines == {"share-partition", "share-session", "share-state", "ic", "revoke-delay", "key-range-assign",
                        "expansion"}
