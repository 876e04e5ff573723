"""BrokerConfig: the broker's own settings under Kafka's config names, beside impl/share's ShareConfig.

`split_properties({...})` sends each `--set NAME=VALUE` to the one that knows
the name: the share-group settings (group.share.record.lock.duration.ms,
group.share.delivery.count.limit, group.share.partition.max.record.locks,
group.share.max.share.sessions, share.auto.offset.reset, ...) to ShareConfig,
the consumer-group settings (group.consumer.*, group.min/max.session.timeout.ms,
group.initial.rebalance.delay.ms, group.max.size, offset.metadata.max.bytes,
offsets.topic.segment.bytes) to impl/groups' GroupConfig, kept in
`BrokerConfig.groups`, the individual-commit settings (accept.individual.commit,
individual.commit.max.ranges, individual.commit.log.segment.bytes,
max.bytes.key.range.cache, max.bytes.fetcher.filtering) to impl/ic's IcConfig,
kept in `BrokerConfig.ic`, the rest below to BrokerConfig. An unknown name or a
bad value raises ValueError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from kipcheck.impl.groups.config import GroupConfig
from kipcheck.impl.groups.config import known_names as group_names
from kipcheck.impl.ic.config import IcConfig
from kipcheck.impl.ic.config import known_names as ic_names
from kipcheck.impl.settings import kafka_name, parse_boolean, parse_integer
from kipcheck.impl.share.config import ShareConfig

_PROPERTIES = {
    "node.id": "node_id",
    "num.partitions": "default_partitions",
    "auto.create.topics.enable": "auto_create_topics",
    "socket.request.max.bytes": "max_request_bytes",
    "queued.max.request.bytes": "queued_max_request_bytes",
    "queued.max.request.bytes.per.connection": "connection_queued_max_request_bytes",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "max.connections": "max_connections",
    "max.connections.per.ip": "max_connections_per_ip",
    "max.broker.partitions": "max_broker_partitions",
    "log.segment.bytes": "segment_bytes",
    "log.flush.interval.messages": "flush_interval_messages",
    "log.flush.interval.ms": "flush_interval_ms",
    "group.share.session.timeout.ms": "session_timeout_ms",
    "group.share.heartbeat.interval.ms": "heartbeat_interval_ms",
    "group.share.max.size": "max_group_size",
    "advertised.listeners": "advertised_listener",
    "message.max.bytes": "max_message_bytes",
    "log.message.timestamp.after.max.ms": "timestamp_after_max_ms",
    "log.message.timestamp.before.max.ms": "timestamp_before_max_ms",
    "num.io.threads": "io_threads",
    "queued.request.min.bytes.per.second": "queued_request_min_bytes_per_second",
}


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int = 0
    default_partitions: int = 1
    auto_create_topics: bool = True
    max_request_bytes: int = 104857600
    # Frames being read or handled, broker-wide. Kafka's default is unbounded; this one holds one
    # maximal frame (Kafka requires at least socket.request.max.bytes) or a hundred 1 MB produce requests.
    queued_max_request_bytes: int = 104857600
    # The same per connection (this broker's own: Kafka reads one request per connection at a time,
    # this broker reads pipelined requests ahead); a frame alone on its connection is always admitted.
    connection_queued_max_request_bytes: int = 16777216
    connections_max_idle_ms: int = 600000
    # This broker's own: while others wait for queued.max.request.bytes, a frame arriving slower is closed.
    queued_request_min_bytes_per_second: int = 1048576
    # Kafka's defaults are unbounded; these fit the file descriptors of a process whose hard limit is 4096.
    max_connections: int = 1000
    max_connections_per_ip: int = 2147483647
    # KIP-578's name (not in Kafka 4.2): the partitions this broker hosts, every topic together.
    max_broker_partitions: int = 2000
    segment_bytes: int = 1073741824
    # Kafka's default never forces an fsync per message; we fsync on a 1 s timer and at shutdown.
    flush_interval_messages: int = 2**62
    flush_interval_ms: int = 1000
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_group_size: int = 200
    # PLAINTEXT://HOST:PORT given to clients in Metadata and FindCoordinator; empty: the address listened on.
    advertised_listener: str = ""
    # Kafka's defaults: the largest produced batch, and how far a record's timestamp may lie ahead or behind.
    max_message_bytes: int = 1048588
    timestamp_after_max_ms: int = 3600000
    timestamp_before_max_ms: int = 2**63 - 1
    # Threads that decode large requests and read produced and filtered records, off the event loop.
    io_threads: int = 8
    groups: GroupConfig = field(default_factory=GroupConfig)
    ic: IcConfig = field(default_factory=IcConfig)

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if type(value) is int and value < (0 if name == "node_id" else 1):
                raise ValueError(f"{kafka_name(_PROPERTIES, name)} must be positive, found {value}")
        if self.queued_max_request_bytes < self.max_request_bytes:  # Kafka's KafkaConfig rule
            raise ValueError(f"queued.max.request.bytes ({self.queued_max_request_bytes}) must be at least "
                             f"socket.request.max.bytes ({self.max_request_bytes})")


def split_properties(properties: Mapping[str, str], profile: str = "kafka-4.2") -> tuple[BrokerConfig, ShareConfig]:
    """(BrokerConfig, ShareConfig) under `profile`; ValueError naming the first bad setting.

    Under kafka-4.2 the share settings must lie in Kafka 4.2's ranges (ShareConfig.from_properties).
    """
    values, share, groups, ic = {}, {}, {}, {}
    for name, raw in properties.items():
        field_name = _PROPERTIES.get(name)
        if name in group_names():
            groups[name] = raw
        elif name in ic_names():
            ic[name] = raw
        elif field_name is None:
            share[name] = raw
        else:
            values[field_name] = _parse(name, field_name, raw)
    share_config = ShareConfig.from_properties({**share, "profile": profile})  # also refuses unknown names
    config = BrokerConfig(**values, groups=GroupConfig.from_properties(groups), ic=IcConfig.from_properties(ic))
    # ShareGroupConfig.validate: every member of the largest share group can hold a share session.
    if profile == "kafka-4.2" and share_config.max_share_sessions < config.max_group_size:
        raise ValueError(f"group.share.max.share.sessions ({share_config.max_share_sessions}) must be at least "
                         f"group.share.max.size ({config.max_group_size}) under Kafka 4.2")
    return config, share_config


def known_names() -> list[str]:
    return sorted([*_PROPERTIES, *group_names(), *ic_names()])


def advertised_address(listener: str) -> tuple[str, int]:
    """(host, port) of a `PLAINTEXT://HOST:PORT` listener; ValueError otherwise."""
    scheme, _, address = listener.partition("://")
    host, _, port = address.rpartition(":")
    if scheme != "PLAINTEXT" or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"advertised.listeners must be PLAINTEXT://HOST:PORT, found {listener!r}")
    return host, int(port)


def _parse(name: str, field_name: str, raw: str) -> int | bool | str:
    if field_name == "advertised_listener":
        advertised_address(raw)
        return raw
    if field_name == "auto_create_topics":
        return parse_boolean(name, raw)
    return parse_integer(name, raw)
