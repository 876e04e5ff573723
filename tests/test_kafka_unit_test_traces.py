"""Apache Kafka 4.2's own ShareSessionCacheTest cases, encoded as share-session traces (tests/data/kafka-4.2-unit-tests,
one file per test method): what Kafka's tests assert is allowed by the kafka-4.2 profile, and an answer those tests
rule out is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from kipcheck.oracle.check import check_lines

CASES = sorted((Path(__file__).parent / "data" / "kafka-4.2-unit-tests").glob("*.jsonl"))


def test_the_corpus_is_there():
    assert len(CASES) == 7


@pytest.mark.parametrize("path", CASES, ids=lambda path: path.stem)
def test_kafka_own_test_case_is_allowed_by_the_kafka_42_profile(path):
    verdict = check_lines(path.read_text().splitlines())
    assert verdict, verdict.summary()


def test_the_group_empty_event_on_a_stale_session_is_required():
    """SS-31: Kafka 4.2 empties the group when a stale session's connection closes; a broker that does not breaks it."""
    path = next(case for case in CASES if case.stem.endswith("OnStaleSession"))
    lines = path.read_text().splitlines()
    changed = [line.replace('"group_empty": true', '"group_empty": false') for line in lines]
    assert changed != lines
    verdict = check_lines(changed)
    assert not verdict and "SS-31" in verdict.summary(), verdict.summary()
