"""A misspelt field never passes unjudged: an unknown key in args or observed, at any depth, is malformed input.

Every op of every machine is tried: in each allowed example trace, the first step of each op gets an
unknown key in its args, in its observed, and in the first object inside any of its fields.
"""

import copy
import json

import pytest

from kipcheck.oracle.check import check_lines
from kipcheck.oracle.examples import examples

TYPO = "eror"


def objects_inside(part: dict):
    """(field, object) for the first object held in each field's list or map."""
    for name, value in part.items():
        inner = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
        first = next((entry for entry in inner if isinstance(entry, dict)), None)
        if first is not None:
            yield name, first


def typo_variants(step: dict):
    """(where, corrupted step) for each place an unknown key can go in `step`."""
    for part in ("args", "observed"):
        if part == "args" or part in step:
            corrupted = copy.deepcopy(step)
            corrupted.setdefault(part, {})[TYPO] = "NONE"
            yield part, corrupted
            for name, _ in objects_inside(step.get(part, {})):
                corrupted = copy.deepcopy(step)
                dict(objects_inside(corrupted[part]))[name][TYPO] = 1
                yield f"{part}.{name}", corrupted


def cases():
    for example in examples():
        if example.expected_clause is not None:
            continue
        lines = example.path.read_text().splitlines()
        seen_ops = set()
        for index, line in enumerate(lines[1:], start=1):
            step = json.loads(line)
            if step["op"] in seen_ops:
                continue
            seen_ops.add(step["op"])
            for where, corrupted in typo_variants(step):
                name = f"{example.machine}:{step['op']}:{where}:{example.path.stem}"
                yield pytest.param(lines[:index] + [json.dumps(corrupted)] + lines[index + 1:], index + 1, where, id=name)


CASES = list(cases())


def test_every_machine_and_op_is_tried():
    ops = {case.id.split(":")[0] + ":" + case.id.split(":")[1] for case in CASES}
    machines = {op.split(":")[0] for op in ops}
    assert len(machines) == 7 and len(ops) >= 25, sorted(ops)
    assert any(":args.batches:" in case.id for case in CASES) and any(":args.members:" in case.id for case in CASES)


@pytest.mark.parametrize("lines, line, where", CASES)
def test_unknown_field_is_malformed(lines, line, where):
    verdict = check_lines(lines)
    assert verdict.status == "malformed" and verdict.exit_code == 2, verdict.summary()
    assert verdict.line == line and f"unknown field '{TYPO}'" in verdict.reason and where in verdict.reason, verdict.reason


def test_the_reason_lists_the_known_fields():
    header = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition"}
    steps = [{"step": 1, "at_ms": 0, "actor": "p", "op": "append", "args": {"count": 2}},
             {"step": 2, "at_ms": 0, "actor": "c", "op": "acquire", "args": {"max_records": 2},
              "observed": {"records": [[0, 1, 1]]}},
             {"step": 3, "at_ms": 0, "actor": "c", "op": "acknowledge",
              "args": {"batches": [{"first": 0, "last": 1, "type": "accept", "typ": "x"}]}, "observed": {"error": "NONE"}}]
    verdict = check_lines([json.dumps(header)] + [json.dumps(step) for step in steps])
    assert verdict.reason == "unknown field 'typ' in args.batches[0] of 'acknowledge' (known: first, last, type)"
