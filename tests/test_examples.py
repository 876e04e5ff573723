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
