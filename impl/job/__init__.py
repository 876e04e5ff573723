"""A KIP-287 job on a Kafka cluster: its processors' groups and readers over the wire (spec/expansion.md).

    from kipcheck.impl.job import ProcessorSettings, run_processor

Modules (each documents its API in its own docstring):

- `consumer_group`:     ConsumerProtocolGroup, a job's group on KIP-848 with the reference broker's
                        `linear-hashing` server assignor, over kipcheck's consumer in revoke-delay mode.
- `classic_group`:      ClassicProtocolGroup, a job's group on the classic protocol whose leader assigns
                        by linear hashing (client-side): the job runs on Apache Kafka too.
- `classic_membership`: the classic protocol's member (join, sync, heartbeats) in a thread of its own.
- `reader`:             KioReader, a processor's reader over kipcheck's consumer.
- `runner`:             ProcessorSettings and run_processor: one processor, from its settings to its last poll.

impl/expansion holds the rules and what needs only confluent-kafka's clients
(the partitioner, the job record and its store, the producer, the expansion
tool, the processor library, the confluent reader); this package adds what
speaks the wire through impl/consumer.
"""

from kipcheck.impl.job.runner import ProcessorSettings, run_processor

__all__ = ["ProcessorSettings", "run_processor"]
