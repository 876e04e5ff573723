"""DeleteGroups (42) v0-2, for every kind of group, as Kafka 4.2's group coordinator answers it (what
Admin.deleteConsumerGroups and deleteShareGroups, and so kafka-consumer-groups.sh and kafka-share-groups.sh
--delete, send).

A group is deleted only without members (NON_EMPTY_GROUP otherwise): a classic or consumer group with its
committed offsets, a share group with the state of every share-partition it has (DeleteShareGroupState, as
share_admin.py's DeleteShareGroupOffsets). An id no group has is GROUP_ID_NOT_FOUND, an empty one
INVALID_GROUP_ID. The KIP's text has no way to delete a share-partition's state (seed 002 has no
DeleteShareGroupState): under `kip` a share group with state is not deleted (UNSUPPORTED_VERSION).
"""

from __future__ import annotations

from kipcheck.impl.broker.clock import now_ms
from kipcheck.impl.broker.handlers.share_admin import share_group_alterable, share_group_exists
from kipcheck.impl.wire.codec import reply
from kipcheck.model.errors import Error


def handlers(broker) -> dict:
    async def delete_groups(connection, request):
        return reply(request, throttle_time=0, results=[{"group_id": group_id, "error_code": _delete(broker, group_id)}
                                                        for group_id in request.body.groups_names])

    return {42: (0, 2, delete_groups)}


def _delete(broker, group_id: str) -> str:
    if not group_id:
        return Error.INVALID_GROUP_ID
    if not share_group_exists(broker, group_id):
        return broker.consumer_groups.delete_group(group_id)
    error, _ = share_group_alterable(broker, group_id)
    stored = broker.engine.stored_partitions(group_id)
    if error == Error.NONE and stored and broker.share_config.profile == "kip":
        error = Error.UNSUPPORTED_VERSION
    for tp in stored if error == Error.NONE else ():
        error = broker.engine.delete_state(group_id, tp, now_ms())
        if error != Error.NONE:
            return error
    if error == Error.NONE:
        broker.groups.forget(group_id)
    return error
