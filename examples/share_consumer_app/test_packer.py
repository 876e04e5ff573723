"""The packer's tests, each on a reference broker of its own that the kipcheck plugin judges.

The second test's packer has a deliberate acknowledgement bug: its own assertion passes, and the plugin
fails it, naming the acknowledgement the broker refused and the clause that made the broker refuse it.
"""

import time

import pytest
from confluent_kafka import AcknowledgeType, Producer

from packer import Packer, TryLater

ORDERS = [f"order-{number}".encode() for number in range(3)]
RETRY_AFTER_S = 3.0  # longer than the lock below

# Read from the start of the topic; lock each delivered order for 2 s (Kafka's minimum can go down to 1 s).
pytestmark = pytest.mark.kipcheck(settings={"share.auto.offset.reset": "earliest",
                                            "group.share.min.record.lock.duration.ms": 1000,
                                            "group.share.record.lock.duration.ms": 2000})


def produce(bootstrap: str, orders: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for order in orders:
        producer.produce("orders", value=order)
    assert producer.flush(30) == 0


class PrinterBusyOnce:
    """Packs every order, but the label printer is busy the first time order-1 comes."""

    def __init__(self):
        self.busy = {b"order-1"}

    def __call__(self, order: bytes) -> None:
        if order in self.busy:
            self.busy.remove(order)
            raise TryLater("the label printer is busy")


def test_every_order_is_packed(kipcheck_broker):
    produce(kipcheck_broker.bootstrap, ORDERS)
    packer = Packer(kipcheck_broker.bootstrap, PrinterBusyOnce())
    packer.run(orders=len(ORDERS))
    assert sorted(set(packer.packed)) == ORDERS


class WaitingPacker(Packer):
    """The deliberate bug: waits for the printer while holding the order, past the order's lock. Its
    acknowledgement comes too late, the broker refuses it, and every order of that delivery is delivered
    again: packed twice. The test's own assertion does not see it."""

    def handle(self, message) -> None:
        while True:
            try:
                self.pack(message.value())
                break
            except TryLater:
                time.sleep(RETRY_AFTER_S)
        self.packed.append(message.value())
        self.consumer.acknowledge(message, AcknowledgeType.ACCEPT)


def test_every_order_is_packed_by_the_waiting_packer(kipcheck_broker):
    produce(kipcheck_broker.bootstrap, ORDERS)
    packer = WaitingPacker(kipcheck_broker.bootstrap, PrinterBusyOnce())
    packer.run(orders=len(ORDERS))
    assert sorted(set(packer.packed)) == ORDERS
