"""The trace envelope: malformed input exits 2 with a line and a reason, never a pass."""

import json
import subprocess
import sys

import pytest

from kipcheck.oracle.check import check_lines

HEADER = {"format": "kipcheck-trace", "version": 1, "machine": "expansion",
          "config": {"initial_partitions": 2, "initial_processors": 2}}


def trace(*steps, header=HEADER):
    return [json.dumps(header)] + [json.dumps(s) if isinstance(s, dict) else s for s in steps]


def route(n, key_hash=1, at_ms=0, **extra):
    return {"step": n, "at_ms": at_ms, "actor": "a", "op": "route", "args": {"key_hash": key_hash}, **extra}


@pytest.mark.parametrize("lines, line, reason", [
    ([], None, "empty file"),
    (["", json.dumps(HEADER)], 1, "blank line"),
    (["\ufeff" + json.dumps(HEADER)], 1, "byte order mark (BOM"),
    (trace("\ufeff" + json.dumps(route(1))), 2, "byte order mark (BOM"),
    (["not json"], 1, "not JSON"),
    (trace(header={**HEADER, "format": "x"}), 1, '"format"'),
    (trace(header={**HEADER, "version": 2}), 1, "unsupported version"),
    (trace(header={**HEADER, "machine": "nope"}), 1, "unknown machine"),
    (trace(header={**HEADER, "profile": "nope"}), 1, "unknown profile"),
    (trace(header={**HEADER, "config": {"speed": 1}}), 1, "unknown config key"),
    (trace(header={**HEADER, "config": {"initial_partitions": "2"}}), 1, "must be int"),
    (trace(header={**HEADER, "config": {"initial_partitions": 3, "initial_processors": 2}}), 1, "EX-1"),
    (trace(route(1), "{broken"), 3, "not JSON"),
    (trace(route(2)), 2, '"step" must be 1'),
    (trace(route(1, at_ms=5), route(2, at_ms=4)), 3, "back in time"),
    (trace({"step": 1, "at_ms": 0, "actor": "a"}), 2, "missing required field 'op'"),
    (trace({"step": 1, "at_ms": 0, "actor": "a", "op": "fly"}), 2, "unknown op 'fly'"),
    (trace({"step": 1, "at_ms": 0, "actor": "a", "op": "route", "args": {}}), 2, "needs args.key_hash"),
    (trace(route(1, key_hash="7")), 2, "must be an integer"),
    (trace(route(1, key_hash=True)), 2, "must be an integer"),
    (trace(route(1, observed={"partition": "0"})), 2, "observed.partition"),
    (trace(route(1, color="red")), 2, "unknown step field"),
    (trace(route(1, at_ms=-1)), 2, "non-negative"),
])
def test_malformed(lines, line, reason):
    verdict = check_lines(lines)
    assert verdict.status == "malformed" and verdict.exit_code == 2, verdict.summary()
    assert verdict.line == line and reason in verdict.reason, verdict.summary()


def test_violation_names_step_clause_allowed_and_observed():
    verdict = check_lines(trace(route(1, key_hash=3, observed={"partition": 1}),
                                route(2, key_hash=3, observed={"partition": 0})))
    assert verdict.status == "violation" and verdict.exit_code == 1
    assert (verdict.step, verdict.clause) == (2, "EX-2")
    assert verdict.allowed == "partition=1" and verdict.observed == "partition=0"


def test_bad_utf8_names_its_line_and_byte():
    lines = [json.dumps(HEADER).encode(), b"", json.dumps(route(1, actor="x")).encode().replace(b'"x"', b'"\xff"')]
    verdict = check_lines(lines)
    assert (verdict.status, verdict.line) == ("malformed", 3), verdict.summary()
    assert verdict.reason == "not UTF-8: byte 35 of the line is 0xff", verdict.reason


def test_blank_lines_are_ignored_and_a_header_alone_passes_with_zero_steps():
    assert check_lines(trace()).summary() == "ok         <trace>  (expansion/kip, 0 steps)"
    verdict = check_lines(trace(route(1), "", "   ", route(2), ""))
    assert verdict and verdict.steps == 2
    assert check_lines(trace(route(1), "", "{broken")).line == 4, "line numbers count blank lines"


def test_an_unreadable_file_names_no_line(tmp_path):
    from kipcheck.oracle.check import check_file

    for path in (tmp_path / "missing.jsonl", tmp_path):
        verdict = check_file(path)
        assert verdict.status == "malformed" and verdict.line is None, verdict.summary()
        assert verdict.summary() == f"MALFORMED  {path}  cannot read: {verdict.reason.split(': ', 1)[1]}"
        assert "line" not in verdict.summary()


def test_left_out_fields_are_not_judged():
    assert check_lines(trace(route(1, observed={}), route(2))).status == "ok"


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "kipcheck", *args], capture_output=True, text=True, input=stdin)


def test_cli_exit_codes_and_one_line_per_file(tmp_path):
    good, bad, broken = tmp_path / "good.jsonl", tmp_path / "bad.jsonl", tmp_path / "broken.jsonl"
    good.write_text("\n".join(trace(route(1, observed={"partition": 1, "processor": 1}))))
    bad.write_text("\n".join(trace(route(1, observed={"partition": 0}))))
    broken.write_text("{")
    assert run_cli("check", str(good)).returncode == 0
    result = run_cli("check", str(good), str(bad))
    assert result.returncode == 1 and len(result.stdout.strip().splitlines()) == 2
    assert "step 1 breaks EX-2" in result.stdout
    result = run_cli("check", str(good), str(bad), str(broken), str(tmp_path / "missing.jsonl"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "cannot read" in result.stdout and "line 1: not JSON" in result.stdout


def test_cli_reads_stdin():
    result = run_cli("check", "-", stdin="\n".join(trace(route(1, observed={"partition": 1}))))
    assert result.returncode == 0 and result.stdout.startswith("ok")


def test_cli_help():
    result = run_cli("--help")
    assert result.returncode == 0 and "check" in result.stdout and "conformance" in result.stdout
