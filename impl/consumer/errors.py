"""The consumer's errors: each names Kafka's error where one exists."""

from __future__ import annotations

from kipcheck.model.errors import Error


class KafkaError(Exception):
    """A call that failed with Kafka's error `error` (e.g. "UNKNOWN_MEMBER_ID"); the message says more."""

    def __init__(self, error: str, message: str = ""):
        super().__init__(f"{error}: {message}" if message else error)
        self.error = error


class CommitFailed(KafkaError):
    """A commit refused for ownership: the partition is not this consumer's, or the group no longer knows it.

    Its error is ILLEGAL_GENERATION, as Kafka's CommitFailedException ("the group has already rebalanced and
    assigned the partitions to another member"); `partitions` are the refused ones.
    """

    def __init__(self, partitions, message: str):
        super().__init__(Error.ILLEGAL_GENERATION, message)
        self.partitions = frozenset(partitions)


class IllegalState(Exception):
    """A call the consumer's state does not allow (as Java's IllegalStateException): closed, not subscribed, ..."""
