"""Classic group APIs: JoinGroup (11) v0-9, SyncGroup (14) v0-5, Heartbeat (12) v0-4, LeaveGroup (13) v0-5,
ListGroups (16) v0-5, DescribeGroups (15) v0-6.

The rules are impl/groups' (GroupCoordinator); this module carries them over
the wire. JoinGroup and SyncGroup answers may be parked until the join phase
completes or the leader syncs: the handler awaits them (the connection keeps
reading; answers go back in request order). As Kafka's GroupCoordinatorService
does before the group is even looked at: an empty group id is
INVALID_GROUP_ID, and a session timeout outside group.min.session.timeout.ms
.. group.max.session.timeout.ms is INVALID_SESSION_TIMEOUT. JoinGroup v0 has
no rebalance timeout: the session timeout serves (as in Kafka).
"""

from __future__ import annotations

import asyncio

from kipcheck.impl.broker.clock import now_ms
from kipcheck.impl.broker.server import release_frame
from kipcheck.impl.groups.classic import JoinRequest
from kipcheck.impl.groups.classic_group import DEAD, STABLE, JoinAnswer, Pending
from kipcheck.impl.wire.codec import reply
from kipcheck.model.errors import Error


def handlers(broker) -> dict:
    coordinator = broker.consumer_groups

    async def join_group(connection, request):
        body, version = request.body, request.api_version
        session_ms = _ms(body.session_timeout)
        config = broker.config.groups
        if not body.group_id:
            answer = JoinAnswer(Error.INVALID_GROUP_ID, body.member_id)
        elif not config.min_session_timeout_ms <= session_ms <= config.max_session_timeout_ms:
            answer = JoinAnswer(Error.INVALID_SESSION_TIMEOUT, body.member_id)
        else:
            answer = await answer_of(coordinator.join(JoinRequest(
                body.group_id, body.member_id, getattr(body, "group_instance_id", None), body.protocol_type,
                tuple((protocol.name, protocol.metadata) for protocol in body.protocols), session_ms,
                _ms(body.rebalance_timeout) if version >= 1 else session_ms, request.header.client_id or "",
                connection.peer, requires_known_member_id=version >= 4, supports_skip_assignment=version >= 9),
                now_ms()))
        nullable = version >= 7
        return reply(request, throttle_time=0, error_code=answer.error, generation_id=answer.generation_id,
                     protocol_type=answer.protocol_type, leader=answer.leader, member_id=answer.member_id,
                     protocol_name=answer.protocol_name if answer.protocol_name is not None or nullable else "",
                     skip_assignment=answer.skip_assignment,
                     members=[{"member_id": member_id, "group_instance_id": instance_id, "metadata": metadata}
                              for member_id, instance_id, metadata in answer.members])

    async def sync_group(connection, request):
        body = request.body
        if not body.group_id:
            return reply(request, throttle_time=0, error_code=Error.INVALID_GROUP_ID, assignment=b"")
        assignments = {assignment.member_id: assignment.assignment for assignment in body.assignments}
        answer = await answer_of(coordinator.sync(
            body.group_id, body.member_id, getattr(body, "group_instance_id", None), body.generation_id,
            getattr(body, "protocol_type", None), getattr(body, "protocol_name", None), assignments, now_ms()))
        return reply(request, throttle_time=0, error_code=answer.error, protocol_type=answer.protocol_type,
                     protocol_name=answer.protocol_name, assignment=answer.assignment)

    async def heartbeat(connection, request):
        body = request.body
        error = Error.INVALID_GROUP_ID if not body.group_id else coordinator.heartbeat(
            body.group_id, body.member_id, getattr(body, "group_instance_id", None), body.generation_id, now_ms())
        return reply(request, throttle_time=0, error_code=error)

    async def leave_group(connection, request):
        body, version = request.body, request.api_version
        identities = [(body.member_id, None)] if version < 3 else \
            [(member.member_id, member.group_instance_id) for member in body.members]
        if not body.group_id:
            error, errors = Error.INVALID_GROUP_ID, []
        else:
            error, errors = coordinator.leave(body.group_id, identities, now_ms())
        if version < 3:
            return reply(request, throttle_time=0, error_code=error if error != Error.NONE else errors[0])
        return reply(request, throttle_time=0, error_code=error, members=[
            {"member_id": member_id, "group_instance_id": instance_id, "error_code": member_error}
            for (member_id, instance_id), member_error in zip(identities, errors)])

    return {11: (0, 9, join_group), 14: (0, 5, sync_group), 12: (0, 4, heartbeat), 13: (0, 5, leave_group),
            **_admin_handlers(broker)}


def _admin_handlers(broker) -> dict:
    async def list_groups(connection, request):
        states = {state.lower() for state in getattr(request.body, "states_filter", ())}
        types = {kind.lower() for kind in getattr(request.body, "types_filter", ())}
        groups = [group for group in _listed(broker)
                  if (not states or group["group_state"].lower() in states)
                  and (not types or group["group_type"] in types)]
        return reply(request, throttle_time=0, error_code=Error.NONE, groups=groups)

    async def describe_groups(connection, request):
        return reply(request, throttle_time=0, groups=[_described(broker, group_id, request.api_version)
                                                        for group_id in request.body.groups])

    return {16: (0, 5, list_groups), 15: (0, 6, describe_groups)}


async def answer_of(pending: Pending):
    """The parked answer, once the coordinator gives it (a closed connection cancels the wait, not the group)."""
    if pending.done:
        return pending.answer
    release_frame()
    future = asyncio.get_running_loop().create_future()
    pending.on_complete(lambda answer: None if future.done() else future.set_result(answer))
    return await future


def _ms(delta) -> int:
    return round(delta.total_seconds() * 1000)


def _listed(broker) -> list[dict]:
    coordinator = broker.consumer_groups
    listed = []
    for group_id in sorted(set(coordinator.classic.groups) | set(coordinator.offsets.groups())):
        group = coordinator.classic.groups.get(group_id)
        if coordinator.group_type(group_id) == "classic":
            listed.append({"group_id": group_id, "protocol_type": (group.protocol_type if group else None) or "",
                           "group_state": group.state if group else "Empty", "group_type": "classic"})
    for group_id, group in sorted(coordinator.consumer.groups.items()):
        listed.append({"group_id": group_id, "protocol_type": "consumer", "group_state": group.state(),
                       "group_type": "consumer"})
    for group_id, group in sorted(broker.groups.groups.items()):
        listed.append({"group_id": group_id, "protocol_type": "share",
                       "group_state": "Stable" if group.members else "Empty", "group_type": "share"})
    return listed


def _described(broker, group_id: str, version: int) -> dict:
    """DescribeGroups serves classic groups; any other id is Dead (v6+: GROUP_ID_NOT_FOUND), as in Kafka 4.2."""
    coordinator = broker.consumer_groups
    if coordinator.group_type(group_id) != "classic":
        return {"group_id": group_id, "group_state": DEAD, "protocol_type": "", "protocol_data": "", "members": [],
                "error_code": Error.GROUP_ID_NOT_FOUND if version >= 6 else Error.NONE,
                "error_message": f"Group {group_id} not found." if version >= 6 else None}
    group = coordinator.classic.groups.get(group_id)
    stable = group is not None and group.state == STABLE
    members = [] if group is None else [
        {"member_id": member.member_id, "group_instance_id": member.instance_id, "client_id": member.client_id,
         "client_host": member.client_host, "member_metadata": member.metadata(group.protocol_name) if stable else b"",
         "member_assignment": member.assignment if stable else b""} for member in group.members.values()]
    return {"group_id": group_id, "error_code": Error.NONE, "error_message": None,
            "group_state": group.state if group else "Empty",
            "protocol_type": (group.protocol_type if group else None) or "",
            "protocol_data": (group.protocol_name or "") if stable else "", "members": members}
