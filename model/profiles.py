"""The profiles a trace is judged under (TRACE-FORMAT.md `profile`; spec/README.md, "Profiles").

`kip` is the seed documents' text. The Kafka profiles are Apache Kafka's released behaviour where it
differs from the KIP text, each a layer over the one before: `kafka-4.2` over `kip`, `kafka-4.4` (Kafka
4.3 and 4.4's share groups) over `kafka-4.2`. Only the share machines (share-partition, share-session,
share-state) tell the profiles apart; the others judge every trace by the seeds.
"""

from __future__ import annotations

KIP, KAFKA_42, KAFKA_44 = "kip", "kafka-4.2", "kafka-4.4"
PROFILES = (KIP, KAFKA_42, KAFKA_44)
KAFKA_PROFILES = (KAFKA_42, KAFKA_44)


def is_kafka(profile: str) -> bool:
    """Whether `profile` is Apache Kafka's (kafka-4.2 or a later one, which keeps kafka-4.2's clauses but those
    it replaces)."""
    return profile in KAFKA_PROFILES
