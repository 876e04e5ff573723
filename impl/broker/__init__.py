"""The reference broker: the Kafka wire protocol (through kio) in front of impl/share.

A one-node broker that real clients (confluent-kafka's ShareConsumer,
Producer, Consumer in classic and KIP-848 groups, and AdminClient) talk to; run it with
`kipcheck broker --data-dir DIR [--trace-dir DIR] [--set NAME=VALUE ...]`.

Modules:
- `server`:       asyncio connections, framing, pipelined in-order answers, limits.
- `broker`:       the Broker: state, timers (lock expiry, member expiry, log fsync), clean stop.
- `handlers/`:    one module per API group: cluster (ApiVersions, Metadata,
                  CreateTopics, FindCoordinator, InitProducerId), records
                  (Produce, Fetch, ListOffsets), share (ShareGroupHeartbeat,
                  ShareGroupDescribe, ShareFetch, ShareAcknowledge),
                  classic_groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
                  ListGroups, DescribeGroups), consumer_groups
                  (ConsumerGroupHeartbeat, ConsumerGroupDescribe), offsets
                  (OffsetCommit, OffsetFetch, OffsetDelete).
- `log`:          partition logs of raw record batches (impl/wire/batches.py) in durable segment files.
- `metadata`:     topics with stable ids (uuid5 of the name).
- `groups`:       share group membership and assignment.
- `share_engine`: the adapter to impl/share (sessions, share-partitions, share coordinator, traces).
- `config`:       the broker's own settings under Kafka's names (impl/share has the share ones).
- `clock`:        the monotonic millisecond clock.

The share-group rules live in impl/share, the consumer-group rules (classic,
KIP-848, committed offsets) in impl/groups; this package only carries them
over the wire (frames and batches through impl/wire). impl/ never imports oracle/.
"""
