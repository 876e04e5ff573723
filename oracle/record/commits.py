"""Individual commits seen crossing the proxy, written as ic traces judged for the consumers' conduct (IC-22).

    commits = Commits(shelf, names)
    commits.fetched(exchange)      # a Fetch answer: the offsets each client was given, by partition
    commits.committed(exchange)    # an OffsetCommit with offset ranges (IC-20): a `commit` step

One ic trace per group and topic-partition (`ic.<group>.<topic>:<partition>.jsonl`), opened at the first
OffsetCommit carrying ranges for it, with `"conduct": true`: `fetched` steps for what each client was answered
by Fetch (whole batches), `commit` steps for the ranges it committed. A client is named by its `client.id`
(Fetch and OffsetCommit go to different brokers, on different connections, and only the client id is on
both); clients sharing one are one actor, which may hide a violation and never raises a false one.

The commit's answer is not judged here: the stable offset it carries depends on commits made before the proxy
saw the group, and on the order the coordinator served concurrent ones (the coordinator's own ic trace judges
it, spec IC-21). What is judged is the client: it commits only offsets it fetched (IC-22).
"""

from __future__ import annotations

from typing import Callable

from kipcheck.impl.wire.batches import batch_spans
from kipcheck.impl.wire.schemas import pairs
from kipcheck.model.ranges import Range, merge
from kipcheck.oracle.record.live import LiveTrace
from kipcheck.oracle.record.shelf import Shelf


class Commits:
    def __init__(self, shelf: Shelf, name_of: Callable[[object], str]):
        self.shelf, self.name_of = shelf, name_of
        self.given: dict[tuple[str, str], tuple[Range, ...]] = {}   # (client, tp) -> offsets fetched
        self.traces: dict[tuple[str, str], LiveTrace] = {}          # (group, tp) -> its ic trace
        self.unfollowed: dict[str, str] = {}                         # client -> why its fetches are not known

    def fetched(self, exchange) -> None:
        client = exchange.client_id or "-"
        for topic in exchange.response.responses:
            name = topic.topic if hasattr(topic, "topic") else self.name_of(topic.topic_id)
            for part in topic.partitions:
                ranges = [(first, last) for first, last, _, _ in batch_spans(part.records or b"")]
                if ranges:
                    self._given(client, f"{name}:{part.partition_index}", ranges, exchange.received_ms)

    def _given(self, client: str, tp: str, ranges: list[Range], at_ms: int) -> None:
        self.given[(client, tp)] = merge([*self.given.get((client, tp), ()), *ranges])
        for (group, traced), trace in self.traces.items():
            if traced == tp:
                self.shelf.sink(trace).add(at_ms, client, "fetched", {"ranges": [list(pair) for pair in ranges]})

    def committed(self, exchange) -> None:
        request, client = exchange.request, exchange.client_id or "-"
        if client in self.unfollowed:
            return
        for topic in request.topics:
            for part in topic.partitions:
                ranges = pairs(getattr(part, "offset_ranges", ()))
                if ranges:
                    tp = f"{topic.name}:{part.partition_index}"
                    self._trace(request.group_id, tp).add(exchange.sent_ms, client, "commit",
                                                          {"ranges": [list(pair) for pair in ranges]})

    def _trace(self, group: str, tp: str):
        trace = self.traces.get((group, tp))
        if trace is None:
            trace = self.traces[(group, tp)] = self.shelf.open(["ic", group, tp], {
                "machine": "ic", "conduct": True, "config": {}})
            for (client, given_tp), ranges in self.given.items():
                if given_tp == tp:
                    self.shelf.sink(trace).add(0, client, "fetched", {"ranges": [list(pair) for pair in ranges]})
        return self.shelf.sink(trace)

    def missed(self, exchange, reason: str) -> None:
        """A Fetch answer not read: its client's commits are no longer judged (what it was given is unknown)."""
        if exchange.api_key == 1:
            self.unfollowed[exchange.client_id or "-"] = reason
