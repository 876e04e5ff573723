"""An order packer: reads orders through a share group and packs each one (confluent-kafka's ShareConsumer).

Acknowledgement is explicit: an order packed is accepted; one that cannot be packed yet is released, so
that the broker delivers it again (to this consumer or another) instead of this consumer holding it.
"""

import time

from confluent_kafka import AcknowledgeType, ShareConsumer

POLL_TIMEOUT_S = 1.0


class TryLater(Exception):
    """Packing failed for a reason that passes (the label printer is busy)."""


class Packer:
    def __init__(self, bootstrap: str, pack, group: str = "packers", topic: str = "orders"):
        self.pack = pack  # pack(order): packs one order, or raises TryLater
        self.packed: list[bytes] = []  # the orders packed, in order, repeats included
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                       "share.acknowledgement.mode": "explicit"})
        self.consumer.subscribe([topic])

    def run(self, orders: int, timeout_s: float = 60) -> None:
        """Pack until `orders` different orders are packed (or `timeout_s` passed), then leave the group."""
        deadline = time.monotonic() + timeout_s
        while len(set(self.packed)) < orders and time.monotonic() < deadline:
            for message in self.consumer.poll(POLL_TIMEOUT_S):
                if message.error() is None:
                    self.handle(message)
        self.consumer.close()

    def handle(self, message) -> None:
        try:
            self.pack(message.value())
        except TryLater:
            self.consumer.acknowledge(message, AcknowledgeType.RELEASE)
            return
        self.packed.append(message.value())
        self.consumer.acknowledge(message, AcknowledgeType.ACCEPT)
