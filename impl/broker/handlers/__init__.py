"""Request handlers, one module per API group; `all_handlers(broker)` merges their tables.

Each module's `handlers(broker)` returns {api_key: (min version, max version,
async handler(connection, request) -> response body)}; these ranges are what
ApiVersions advertises.
"""

from __future__ import annotations

from kipcheck.impl.broker.handlers import (
    classic_groups, cluster, cluster_admin, configs, consumer_groups, group_admin, offsets, partitions, records, share,
    share_admin, transactions,
)


def all_handlers(broker) -> dict:
    table: dict = {}
    for module in (cluster, partitions, records, share, classic_groups, consumer_groups, offsets, transactions,
                   configs, share_admin, group_admin, cluster_admin):
        table.update(module.handlers(broker))
    return table
