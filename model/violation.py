"""What every model shares: the exception for a disallowed answer, a ruled answer, and the storage errors."""

from __future__ import annotations

from typing import Any, NamedTuple

from kipcheck.model.errors import Error

# SP-27, SS-18, ST-18: the retriable errors of a request that failed because the state it needs could not be
# written or reached (the share coordinator, its log, a disk). Such a request changes nothing. They are the
# retriable answers Apache Kafka 4.2 gives for a failed share-state write (SharePartition.fetchPersisterError,
# CoordinatorOperationExceptionHelper) and KAFKA_STORAGE_ERROR, a failed local disk.
STORAGE_ERRORS = frozenset({
    Error.COORDINATOR_NOT_AVAILABLE, Error.COORDINATOR_LOAD_IN_PROGRESS, Error.NOT_COORDINATOR,
    Error.KAFKA_STORAGE_ERROR, Error.NOT_LEADER_OR_FOLLOWER, Error.UNKNOWN_TOPIC_OR_PARTITION,
})


class Violation(Exception):
    """An observed answer that the model does not allow.

    `clause` is the spec clause id the answer breaks, `allowed` says in words
    what the model would have accepted, `observed` what it was given.
    """

    def __init__(self, clause: str, allowed: str, observed: str) -> None:
        super().__init__(f"{clause}: allowed {allowed}; observed {observed}")
        self.clause = clause
        self.allowed = allowed
        self.observed = observed


class Ruled(NamedTuple):
    """A deterministic answer and the clause that decides it (named when an observation differs)."""

    value: Any
    clause: str
