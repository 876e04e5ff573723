"""Every bundled example trace gets the verdict its place promises."""

import pytest

from kipcheck.oracle.examples import examples

ALL = examples()


def test_there_are_examples_and_violations():
    assert any(e.expected_clause is None for e in ALL)
    assert any(e.expected_clause is not None for e in ALL)


@pytest.mark.parametrize("example", ALL, ids=[f"{e.machine}/{e.path.name}" for e in ALL])
def test_example(example):
    verdict, as_expected = example.judge()
    assert as_expected, verdict.summary()


def test_conformance_command_without_broker_gives_a_verdict(capsys):
    from kipcheck.cli import main

    assert main(["conformance", "--no-broker"]) == 0
    out = capsys.readouterr().out
    assert f"verdict: PASS: {len(ALL)} of {len(ALL)} conformance checks" in out
    assert "share-partition" in out and "violations caught" in out


def test_conformance_refuses_an_unknown_scenario_before_running_anything(capsys):
    from kipcheck.cli import main

    assert main(["conformance", "--scenario", "no-such-scenario", "--scenario", "also-not"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", "nothing ran"
    assert "unknown scenarios 'no-such-scenario', 'also-not' (known: " in captured.err
