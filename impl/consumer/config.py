"""ConsumerConfig: the consumer's settings under the Kafka clients' names.

    config = ConsumerConfig.from_properties({"bootstrap.servers": "127.0.0.1:9092", "group.id": "g",
                                             "max.poll.records": 100})

Values may be strings (as a properties file gives them) or ints; an unknown
name or a bad value raises ValueError naming the setting. Defaults are the Java
consumer's, except `receive.message.max.bytes`, librdkafka's bound on one
answer from the broker and on the records one batch decompresses to (the Java
client has none), which must leave room for a whole fetch, as librdkafka
requires (fetch.max.bytes + 512).

`rebalance.revoke.mode` is kipcheck's own: `delay` (the default) is KIP-983
(seed 001): a revoke requested in one poll completes at the start of the next,
or later with delay_revoke; `callback` is what consumers do today, the mode the
seed's compatibility section keeps available: the listener's on_revoke runs
inside the poll that learns the revoke, which completes when it returns.

Individual commit (seed 000's names, impl/ic/client.py ConsumerIcConfig, kept
in `ConsumerConfig.ic`): `allow.individual.commit` (true: the consumer may
fetch by key range and commit ranges) and `max.num.ranges.to.commit` (10,000:
asynchronous range commits wait until this many ranges are pending, or the
next poll).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Mapping

from kipcheck.impl.consumer.records import RECEIVE_MESSAGE_MAX_BYTES
from kipcheck.impl.ic.client import ConsumerIcConfig
from kipcheck.impl.settings import field_of, kafka_name, parse_integer

DELAY, CALLBACK = "delay", "callback"
AUTO_OFFSET_RESETS = ("latest", "earliest", "none")
RECEIVE_MARGIN_BYTES = 512
IC_PROPERTIES = ("allow.individual.commit", "max.num.ranges.to.commit")

_PROPERTIES = {
    "bootstrap.servers": "bootstrap_servers",
    "group.id": "group_id",
    "group.instance.id": "group_instance_id",
    "client.id": "client_id",
    "group.remote.assignor": "remote_assignor",
    "max.poll.interval.ms": "max_poll_interval_ms",
    "max.poll.records": "max_poll_records",
    "fetch.max.bytes": "fetch_max_bytes",
    "max.partition.fetch.bytes": "max_partition_fetch_bytes",
    "fetch.max.wait.ms": "fetch_max_wait_ms",
    "fetch.min.bytes": "fetch_min_bytes",
    "auto.offset.reset": "auto_offset_reset",
    "request.timeout.ms": "request_timeout_ms",
    "default.api.timeout.ms": "default_api_timeout_ms",
    "receive.message.max.bytes": "receive_message_max_bytes",
    "retry.backoff.ms": "retry_backoff_ms",
    "rebalance.revoke.mode": "revoke_mode",
}
_CHOICES = {"auto_offset_reset": AUTO_OFFSET_RESETS, "revoke_mode": (DELAY, CALLBACK)}


@dataclass(frozen=True)
class ConsumerConfig:
    bootstrap_servers: str = ""
    group_id: str | None = None
    group_instance_id: str | None = None  # a static member (KIP-345): the coordinator knows it by this name
    client_id: str = "kipcheck-consumer"
    remote_assignor: str | None = None
    max_poll_interval_ms: int = 300000
    max_poll_records: int = 500
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    auto_offset_reset: str = "latest"
    request_timeout_ms: int = 30000
    default_api_timeout_ms: int = 60000
    receive_message_max_bytes: int = RECEIVE_MESSAGE_MAX_BYTES
    retry_backoff_ms: int = 100
    revoke_mode: str = DELAY
    ic: ConsumerIcConfig = field(default_factory=ConsumerIcConfig)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str | int]) -> "ConsumerConfig":
        values, ic = {}, {}
        for name, raw in properties.items():
            if name in IC_PROPERTIES:
                ic[name] = raw
                continue
            field_name = field_of(_PROPERTIES, name, "consumer setting", IC_PROPERTIES)
            values[field_name] = raw if isinstance(_default(field_name), str) or _default(field_name) is None \
                else parse_integer(name, raw)
        return replace(cls(), **values, ic=ConsumerIcConfig.from_properties(ic)).checked()

    def checked(self) -> "ConsumerConfig":
        if not self.bootstrap_servers:
            raise ValueError("bootstrap.servers must name at least one host:port")
        for field_name, choices in _CHOICES.items():
            if getattr(self, field_name) not in choices:
                raise ValueError(f"{kafka_name(_PROPERTIES, field_name)} must be one of {', '.join(choices)}, "
                                 f"found {getattr(self, field_name)!r}")
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, int) and value <= 0:
                raise ValueError(f"{kafka_name(_PROPERTIES, item.name)} must be positive, found {value}")
        if self.receive_message_max_bytes < self.fetch_max_bytes + RECEIVE_MARGIN_BYTES:
            raise ValueError(f"receive.message.max.bytes must be at least fetch.max.bytes + {RECEIVE_MARGIN_BYTES}")
        return self

    def bootstrap_addresses(self) -> list[tuple[str, int]]:
        addresses = []
        for server in self.bootstrap_servers.split(","):
            host, _, port = server.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"bootstrap.servers: {server.strip()!r} is not host:port")
            addresses.append((host, int(port)))
        return addresses


def _default(field_name: str):
    return getattr(ConsumerConfig(), field_name)
