"""Seeded bugs in impl/expansion, each caught by the oracle at its clause in the traces the job wrote.

The job is tests/expansion_support.py's (an in-memory topic and group, the library's processors), run through the
seed's expansions while producers keep writing; each bug is one patch of the library, undone after its test:
- a modulo partitioner (librdkafka's kind): the producer's trace breaks EX-2 once partitions grow;
- an assignor that forgets the initial count (linear hashing over the current processor count): a new partition
  goes to the wrong processor at P 15 -> 18, EX-2 in the group's and that processor's traces;
- a new processor that outputs its partitions while it catches up: EX-10 in its trace;
- a processor that reads p + N before it has read p up to the split offset: EX-6;
- an expansion that moves partitions between existing processors (modulo over the processor count), whose new
  holders rebuild the state of keys an existing processor owned: EX-9.
Each is judged in the trace of the part that has the bug (other traces may fail too, at their own steps). The
unpatched job passes every trace (tests/test_expansion_library.py), and its output equals the reference.
"""

from __future__ import annotations

import pytest
from expansion_support import Job

from kipcheck.impl.expansion import assignor
from kipcheck.impl.expansion.partitioner import LinearHashPartitioner
from kipcheck.impl.expansion.processor import PROCESS, Processor, ProcessorError
from kipcheck.model.expansion import key_hash, linear_hash
from kipcheck.oracle.check import check_file

SEED = [("partitions", 15), ("processors", 15), ("partitions", 18)]


def modulo_partitioner(self, key, partitions):
    return key_hash(key) % partitions


def assignor_forgetting_n0(job, partition):
    return linear_hash(partition, job.processors, job.processors)


def output_while_catching_up(self, partition, offset, home):
    return PROCESS if partition in self.takeover else original_use(self, partition, offset, home)


original_use = Processor._use


def modulo_assignor(job, partition):
    return partition % job.processors


BUGS = {
    "modulo-partitioner": ((LinearHashPartitioner, "partition", modulo_partitioner), SEED, "producer", "EX-2"),
    "assignor-forgets-initial-count": ((assignor, "target", assignor_forgetting_n0), SEED, "group", "EX-2"),
    "output-before-caught-up": ((Processor, "_use", output_while_catching_up), SEED, "processor-10", "EX-10"),
    "reads-split-before-source-drained": ((Processor, "_waits", lambda self, partition: False), SEED,
                                          "processor-10", "EX-6"),
    "state-moved-between-existing-processors": ((assignor, "target", modulo_assignor),
                                                [("partitions", 18), ("processors", 15)], "processor-0", "EX-9"),
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_the_seeded_bug_is_caught_at_its_clause(name, tmp_path, monkeypatch):
    (owner, attribute, replacement), expansions, writer, clause = BUGS[name]
    monkeypatch.setattr(owner, attribute, replacement)
    job = Job(10, tmp_path, keys=300)
    try:
        job.run(expansions)
    except (AssertionError, ProcessorError):
        pass  # a broken job may never settle, or its processors refuse what it wrote; what it wrote is judged
    verdicts = {path.name: check_file(path) for path in job.close()}
    caught = verdicts[f"expansion.{writer}.jsonl"]
    assert caught.status == "violation" and caught.clause == clause, caught.summary()
    assert not any(verdict.status == "malformed" for verdict in verdicts.values())
