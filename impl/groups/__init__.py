"""Consumer groups for real: the classic protocol and KIP-848, with durable committed offsets.

What the reference broker's group coordinator does for plain consumers
(confluent-kafka's Consumer with group.protocol=classic or consumer),
following Apache Kafka 4.2's group coordinator where the seeds are silent
(spec/consumer-groups.md records every choice). Nothing here does network
I/O or reads a clock: every call takes `now_ms`, timers fire on `tick(now_ms)`,
so tests drive it with a virtual clock. The broker (impl/broker/handlers:
classic_groups, consumer_groups, offsets) carries it over the wire.

Modules (each documents its API in its own docstring):

- `coordinator`:    GroupCoordinator, the entry point: one id space for
                    classic, consumer and share groups; offset commit, fetch
                    and delete with Kafka's validation.
- `classic`:        ClassicGroups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup
                    and their timers (client-side assignors: the broker
                    relays the leader's assignment).
- `classic_group`:  one classic group's state, and the parked answers (Pending).
- `consumer`:       ConsumerGroups: ConsumerGroupHeartbeat, server-side
                    assignment, session and rebalance timeouts.
- `consumer_group`: one KIP-848 group's state and a member's reconciliation
                    (revocation before assignment).
- `assignors`:      the server assignors (uniform, range, and the
                    key-range assignor that splits partitions into key
                    shares) behind a pluggable interface (`register_assignor`).
- `offsets`:        OffsetStore, committed offsets per (group, topic,
                    partition) on a durable, fsynced log.
- `config`:         GroupConfig, Kafka's group coordinator settings.

impl/ never imports oracle/ (tests/test_layers.py enforces it).
"""
