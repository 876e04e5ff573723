"""run_processor: one processor of a KIP-287 job on a Kafka cluster, from its settings to its last poll.

    settings = ProcessorSettings(servers, group_id="counter", topic="orders", processor=3,
                                 protocol="consumer", reader="kio")
    run_processor(settings, running_count, emit=outputs.append, stop=threading.Event(), trace_dir="traces")

The pieces, chosen by the settings: the job record from the jobs topic
(impl/expansion/store.py); the group, `consumer` (KIP-848 with the reference
broker's linear-hashing server assignor, impl/job/consumer_group.py) or
`classic` (the leader assigns, any Kafka broker, impl/job/classic_group.py);
the reader, `kio` (kipcheck's consumer, impl/job/reader.py) or `confluent`
(confluent-kafka's, impl/expansion/confluent.py); the processor library
(impl/expansion/processor.py) with the user's function and output; and, with
a trace directory, the processor's expansion trace
(`expansion.processor-<n>.jsonl`, a new file for each incarnation).

It polls until `stop` is set (a round that read nothing waits `idle_ms`),
then closes everything; an error (a ProcessorError above all) ends the
processor and is raised, after closing what it opened.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer as ConfluentConsumer

from kipcheck.impl.consumer import Consumer
from kipcheck.impl.expansion.confluent import ConfluentReader
from kipcheck.impl.expansion.processor import MAX_RECORDS, Function, Output, Processor
from kipcheck.impl.expansion.store import QUIET, JobStore
from kipcheck.impl.expansion.tracing import ExpansionTrace
from kipcheck.impl.job.classic_group import ClassicProtocolGroup
from kipcheck.impl.job.classic_membership import Timeouts
from kipcheck.impl.job.consumer_group import ConsumerProtocolGroup
from kipcheck.impl.job.reader import KioReader
from kipcheck.model.expansion import CATCH_UP_LAG_MAX

PROTOCOLS, READERS = ("consumer", "classic"), ("kio", "confluent")
IDLE_MS = 10


@dataclass(frozen=True)
class ProcessorSettings:
    bootstrap: str
    group_id: str
    topic: str
    processor: int
    protocol: str = "consumer"
    reader: str = "kio"
    max_records: int = MAX_RECORDS
    catch_up_lag_max: int = CATCH_UP_LAG_MAX
    timeouts: Timeouts = field(default_factory=Timeouts)  # the classic protocol's
    idle_ms: int = IDLE_MS

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS or self.reader not in READERS:
            raise ValueError(f"protocol is one of {PROTOCOLS} and reader one of {READERS}, "
                             f"found {self.protocol!r} and {self.reader!r}")
        if type(self.processor) is not int or self.processor < 0:
            raise ValueError(f"processor must be an integer >= 0, found {self.processor!r}")


def run_processor(settings: ProcessorSettings, function: Function, emit: Callable[[Output], None],
                  stop: threading.Event, trace_dir: str | Path | None = None) -> None:
    opened: list = []
    try:
        processor = _open(settings, function, emit, trace_dir, opened)
        while not stop.is_set():
            if processor.poll() == 0:
                stop.wait(settings.idle_ms / 1000)
    finally:
        for closable in reversed(opened):
            closable.close()


def _open(settings: ProcessorSettings, function: Function, emit: Callable[[Output], None],
          trace_dir: str | Path | None, opened: list) -> Processor:
    store = JobStore(settings.bootstrap, settings.group_id)
    opened.append(store)
    if settings.protocol == "consumer":
        group = ConsumerProtocolGroup(settings.bootstrap, settings.group_id, settings.topic, settings.processor, store)
    else:
        group = ClassicProtocolGroup(settings.bootstrap, settings.group_id, settings.topic, settings.processor, store,
                                     settings.timeouts)
    opened.append(group)
    if settings.reader == "kio":
        consumer = Consumer({"bootstrap.servers": settings.bootstrap, "client.id": f"reader-{settings.processor}"})
        reader = KioReader(consumer, settings.topic)
    else:
        consumer = ConfluentConsumer({"bootstrap.servers": settings.bootstrap, "enable.auto.commit": False,
                                      "group.id": f"{settings.group_id}-reader-{settings.processor}", **QUIET})
        reader = ConfluentReader(consumer, settings.topic)
    opened.append(consumer)
    trace = None
    if trace_dir is not None:
        trace = ExpansionTrace.open(trace_dir, f"processor-{settings.processor}", group.record.initial,
                                    settings.catch_up_lag_max)
        opened.append(trace)
    return Processor(settings.processor, group, reader, function, emit, trace, settings.max_records,
                     settings.catch_up_lag_max)
