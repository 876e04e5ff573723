"""The Python consumer: the Kafka wire protocol through kio, KIP-848 groups, and KIP-983's revoke-delay poll.

    from kipcheck.impl.consumer import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}, trace_dir="traces")

Modules (each documents its API in its own docstring):

- `consumer`:   Consumer, the API: subscribe / assign, poll, commit (sync and
                async), to_be_revoked_partitions, lost_partitions,
                delay_revoke, pause / resume, close; the callback mode.
- `ownership`:  the partitions held and KIP-983's revoke lists, the
                start-of-poll steps (the consumer's own code, judged by the
                oracle through its traces).
- `membership`: KIP-848 membership in a background heartbeat thread.
- `fetcher`:    positions, the bounded fetch buffer, Fetch and ListOffsets.
- `offsets`:    OffsetCommit / OffsetFetch with Kafka's retries, and
                ProcessedOffsets (what the application finished, as ranges).
- `records`:    record batches decoded (none and gzip), ConsumerRecord
                (TopicPartition is impl/topic_partition.py's).
- `cluster`:    bootstrap, API versions, Metadata, the group coordinator.
- `connection`: one blocking kio connection to a broker.
- `tracing`:    the consumer's revoke-delay trace (files named by impl/tracing.py).
- `config`, `errors`: settings under Kafka's names; errors under Kafka's.

impl/ never imports oracle/ (tests/test_layers.py enforces it).
"""

from kipcheck.impl.consumer.consumer import Consumer
from kipcheck.impl.consumer.errors import CommitFailed, IllegalState, KafkaError
from kipcheck.impl.consumer.records import ConsumerRecord
from kipcheck.impl.topic_partition import TopicPartition

__all__ = ["Consumer", "CommitFailed", "ConsumerRecord", "IllegalState", "KafkaError", "TopicPartition"]
