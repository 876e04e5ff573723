"""KIP-287 end to end (examples/kip287_expansion.py): the seed's running-count job on a real broker while its
producer writes, 10 partitions and processors grown to 15 partitions, 15 processors, then 18 partitions, a new
processor killed -9 while it catches up. Each run's output must equal the single-threaded running count over the
records read back, and every trace (producer, processors, the reference broker's) must pass `kipcheck check`.

Run on the reference broker (KIP-848, its linear-hashing server assignor) and on Apache Kafka 4.2 (the classic
protocol, the group leader assigns). Three broken jobs show the comparison and the oracle can fail: a producer that
routes by modulo (the processors refuse its records, EX-2 in its trace) and a new processor that outputs while it
catches up (outputs doubled, EX-10 in its trace).
"""

from __future__ import annotations

import pytest
from expansion_broker_bugs import launcher as broker_launcher
from expansion_processor_bugs import launcher, load_example

from kipcheck.impl.expansion.partitioner import LinearHashPartitioner
from kipcheck.model.expansion import key_hash
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

pytestmark = pytest.mark.slow  # whole runs of the example, about 30 s each
example = load_example()
SHORT = ["--phase-seconds", "2", "--rate", "150"]  # about 30 s a run on a loaded two-core machine


def run(tmp_path, *arguments: str, processor_launcher: tuple[str, ...] | None = None):
    args = example.parse([*SHORT, "--work-dir", str(tmp_path / "run"), *arguments])
    return example.execute(args, *([processor_launcher] if processor_launcher else []))


def verdicts_of(outcome) -> dict[str, object]:
    return {path.name: verdict for path, verdict in outcome.verdicts.items()}


def failures(outcome) -> str:
    return "\n".join(outcome.problems[:10] + [v.summary() for v in outcome.verdicts.values() if not v][:10])


def assert_the_seed_job_ran(outcome) -> None:
    assert outcome.ok, failures(outcome)
    assert (outcome.record.partitions, outcome.record.processors) == (18, 15)
    assert outcome.killed == [12]
    names = set(verdicts_of(outcome))
    assert {"expansion.producer.jsonl", "expansion.processor-12.2.jsonl"} <= names
    assert {f"expansion.processor-{index}.jsonl" for index in range(15)} <= names
    traces = outcome.job.work / "traces"
    for index in range(10, 15):  # each new processor rebuilt its keys' state from the log, then said ready
        text = "".join(path.read_text() for path in traces.glob(f"expansion.processor-{index}.*jsonl"))
        assert '"op":"rebuild"' in text and '"op":"ready"' in text, index


def test_the_seed_job_on_the_reference_broker_equals_the_reference(tmp_path):
    outcome = run(tmp_path, "--kill")
    assert_the_seed_job_ran(outcome)
    assert outcome.protocol == "consumer"
    assert any(path.parent.name == "traces" and "broker" in str(path) for path in outcome.verdicts), \
        "the reference broker's traces are judged too"


def test_the_seed_job_on_apache_kafka_equals_the_reference(tmp_path, start_kafka):
    kafka = start_kafka("4.2", **example.KAFKA_SETTINGS)
    outcome = run(tmp_path, "--kill", "--bootstrap", kafka.bootstrap)
    assert_the_seed_job_ran(outcome)
    assert outcome.protocol == "classic"


def test_a_producer_routing_by_modulo_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(LinearHashPartitioner, "partition", lambda self, key, partitions: key_hash(key) % partitions)
    outcome = run(tmp_path)
    assert not outcome.ok
    assert any("the run failed" in problem for problem in outcome.problems), outcome.problems
    logs = "".join(path.read_text() for path in (outcome.job.work / "logs").glob("*.log"))
    assert "the producer does not route by linear hashing" in logs, logs[-2000:]  # a processor refused (EX-2)
    producer = verdicts_of(outcome)["expansion.producer.jsonl"]
    assert producer.status == "violation" and producer.clause == "EX-2", producer.summary()


def test_a_new_processor_that_outputs_while_catching_up_is_caught(tmp_path):
    outcome = run(tmp_path, processor_launcher=launcher("output-before-caught-up"))
    assert not outcome.ok
    assert any("output 2 times" in problem for problem in outcome.problems), outcome.problems[:10]
    caught = [verdict for name, verdict in verdicts_of(outcome).items()
              if name.startswith(tuple(f"expansion.processor-{index}." for index in range(10, 15)))]
    assert any(v.status == "violation" and v.clause == "EX-10" for v in caught), [v.summary() for v in caught]


def test_a_server_assignor_that_forgets_the_initial_count_is_caught(tmp_path):
    with EmbeddedBroker(tmp_path / "broker", example.REFERENCE_SETTINGS,
                        launcher=broker_launcher("assignor-forgets-initial-count")) as broker:
        outcome = run(tmp_path, "--bootstrap", broker.bootstrap, "--protocol", "consumer")
    assert not outcome.ok
    # The output can still be right (the wrong processor rebuilds the keys from the log before it outputs them):
    # only the traces show that a partition went where linear hashing over N0 does not send it.
    caught = [verdict for name, verdict in verdicts_of(outcome).items() if name.startswith("expansion.processor-")]
    assert any(v.status == "violation" and v.clause == "EX-2" for v in caught), [v.summary() for v in caught]
