"""A worked example of the adapter protocol of `kipcheck conform --target python:MODULE:FACTORY`.

    kipcheck conform --target python:kipcheck.oracle.conformance.adapter_example:make_partition

(`--target reference` is the same.) FACTORY gets the run's config and returns
an object with on_append, acquire, acknowledge, release_member and, optionally,
spso (see oracle/conformance/targets/in_process.py). impl/share's SharePartition already
speaks the protocol, so the factory only turns the config into its ShareConfig;
an implementation with other names or types wraps them here the same way.
"""

from __future__ import annotations

from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.partition import SharePartition


def make_partition(config: dict) -> SharePartition:
    """FACTORY: a new, empty share-partition at offset 0 with the run's settings."""
    return SharePartition(ShareConfig(delivery_count_limit=config["delivery_count_limit"],
                                      record_lock_duration_ms=config["record_lock_duration_ms"],
                                      max_inflight_records=config["max_inflight_records"], profile=config["profile"]))
