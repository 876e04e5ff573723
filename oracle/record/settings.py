"""What `kipcheck record` may hold, and the share settings its traces are judged with, under Kafka's names.

    settings = RecordSettings.from_properties({"queued.max.request.bytes": "50000000",
                                               "group.share.record.lock.duration.ms": "15000"}, "kafka-4.2")

Limits (a broker's names where a broker has the setting, a client's where a client has it):
- `socket.request.max.bytes`: the largest request frame; a larger one closes its connection, as Kafka's does.
- `receive.message.max.bytes`: the largest answer frame (librdkafka's name); a larger one closes the connection.
- `queued.max.request.bytes`: bytes of frames the proxy holds at once, every connection together (frames being
  forwarded, and those waiting to be observed). A connection reads nothing more until its next frame fits.
- `queued.max.request.bytes.per.connection`: the same for one connection.
- `max.in.flight.requests.per.connection`: requests forwarded and not yet answered on one connection; the
  proxy reads no more from the client until one is answered.
- `max.connections`: client connections at once (each with its own to the broker); one more waits.
- `record.observe.max.bytes`: the largest answer the proxy decodes to observe; a larger one is forwarded
  unread and what it did not observe is said (its member's traces end there).

The share settings (`group.share.*`) are those of conformance targets (BrokerSettings): what the traces'
headers say, Kafka's defaults unless given; and `group.share.min.record.lock.duration.ms` (15000), the shortest
lock the broker gives whatever a group's configuration, which a partial view relies on (SP-81).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kipcheck.impl.settings import parse_integer
from kipcheck.oracle.conformance.targets import BrokerSettings

LIMITS = {
    "socket.request.max.bytes": "max_request_bytes",
    "receive.message.max.bytes": "max_response_bytes",
    "queued.max.request.bytes": "queued_max_bytes",
    "queued.max.request.bytes.per.connection": "connection_queued_max_bytes",
    "max.in.flight.requests.per.connection": "max_in_flight",
    "max.connections": "max_connections",
    "record.observe.max.bytes": "observe_max_bytes",
}
# The broker's shortest lock, whatever a group's configuration: how long a partial view takes a lock to last (SP-81).
MIN_LOCK_NAME = "group.share.min.record.lock.duration.ms"


@dataclass(frozen=True)
class RecordSettings:
    max_request_bytes: int = 104_857_600
    max_response_bytes: int = 104_857_600
    queued_max_bytes: int = 209_715_200
    connection_queued_max_bytes: int = 104_857_600
    max_in_flight: int = 64
    max_connections: int = 500
    observe_max_bytes: int = 67_108_864
    min_lock_duration_ms: int = 15_000
    share: BrokerSettings = field(default_factory=BrokerSettings)

    @classmethod
    def from_properties(cls, properties: dict[str, str], profile: str) -> "RecordSettings":
        """ValueError naming the setting for an unknown name or a bad value."""
        limits, share = {}, {}
        for name, raw in properties.items():
            if name in LIMITS:
                value = parse_integer(name, raw)
                if value < 1:
                    raise ValueError(f"{name} must be at least 1, found {value}")
                limits[LIMITS[name]] = value
            elif name == MIN_LOCK_NAME:
                limits["min_lock_duration_ms"] = parse_integer(name, raw)
            elif name in BrokerSettings.NAMES:
                share[name] = raw
            else:
                known = ", ".join(sorted([*LIMITS, *BrokerSettings.NAMES, MIN_LOCK_NAME]))
                raise ValueError(f"unknown setting {name!r} (known: {known})")
        return cls(**limits, share=BrokerSettings.from_properties(share, profile))
