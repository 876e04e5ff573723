"""Share group APIs (KIP-932): ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78) and ShareAcknowledge (79), v1 and v2
(the share groups' offsets, for admin clients: share_admin.py).

Membership is groups.ShareGroups; the session, acknowledgement and acquisition
rules are impl/share's, reached through share_engine.ShareEngine. The order
inside one ShareFetch is Kafka's: session update (epoch checks, add/forget),
then the piggybacked acknowledgements, then the release of the member's
records if the session closed, then acquisition, long-polling up to
`max_wait` while nothing could be acquired.

Who may fetch (Kafka 4.2, KafkaApis.handleShareFetchRequest and
handleShareAcknowledgeRequest): a member id that is empty or longer than 36
characters is INVALID_REQUEST (`isMemberIdValid`, both profiles); otherwise
the group coordinator is not consulted, so a member that never joined the
group (no ShareGroupHeartbeat) opens a share session like any other. What it
can read depends on the share-partition's state: Kafka's group coordinator
initializes it when a member of the group subscribes to the topic
(GroupMetadataManager, InitializeShareGroupState), and before that the share
coordinator refuses to read it (ShareCoordinatorShard.maybeGetReadStateError:
"Read operation on uninitialized share partition not allowed."), which
SharePartition.fetchPersisterError turns into UNKNOWN_SERVER_ERROR for that
partition of the ShareFetch (SharePartitionManager.handleInitializationException)
and SharePartitionManager.acknowledge into UNKNOWN_TOPIC_OR_PARTITION for its
acknowledgements. In the kafka-4.2 profile the broker answers the same: a
stranger reads nothing from a group nobody subscribed to that topic, and
reads like a member once somebody has (as in Kafka, where authorization, not
membership, guards the fetch); its heartbeat initializes the state of the
subscribed topics' share-partitions as Kafka's does, with start offset -1
(spec ST-2). The `kip` profile keeps serving any member:
seed 002 initializes state at a partition's first assignment but does not say
what a fetch before it gets (spec/share-session.md, "Membership").

Acknowledgement batches arrive as librdkafka sends them (one type for the
whole range) or as the KIP allows (one type per offset); anything else, or a
type outside GAP/ACCEPT/RELEASE/REJECT (and RENEW from version 2), is
INVALID_REQUEST for that partition. Version 2 (Kafka 4.2, KIP-1222, spec
SP-41): a request with IsRenewAck may carry RENEW acknowledgements, which
restart the records' locks and persist nothing; a RENEW without IsRenewAck
is INVALID_REQUEST for its partition. A ShareFetch with IsRenewAck must set
MaxBytes, MinBytes, MaxRecords and MaxWaitMs to 0 (else the whole request is
INVALID_REQUEST, before its session is looked at) and acquires nothing.
ShareFetch v2's ShareAcquireMode picks batch_optimized (0, Kafka's default:
whole log batches, MaxRecords a soft limit) or record_limit (1, KIP-1206:
exactly MaxRecords, spec SP-42); another value is INVALID_REQUEST for the
whole request (Kafka has no third mode). Acknowledgement errors go back per partition (ShareFetch:
`acknowledge_error_code`; ShareAcknowledge: `error_code`); session errors are
the top-level error. A share-partition whose state the coordinator cannot
initialize answers its error (COORDINATOR_NOT_AVAILABLE when the disk refuses
the write) in the partition's `error_code`, as Kafka's erroneous partitions,
once the fetch's wait is over (librdkafka retries such a fetch at once: an
immediate answer would make it spin).
"""

from __future__ import annotations

import itertools

from kipcheck.impl.broker.clock import now_ms
from kipcheck.impl.broker.limits import MAX_WAIT_MS
from kipcheck.impl.broker.metadata import topic_id_of
from kipcheck.impl.share.partition import ACK_TYPES_BY_WIRE, PersisterError
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.impl.wire.codec import reply
from kipcheck.impl.wire.errors import error_code
from kipcheck.model.errors import Error

MEMBER_ID_MAX_CHARS = 36
RENEW = 4   # the acknowledge type of KIP-1222
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1   # ShareFetch v2 ShareAcquireMode (KIP-1206)


def handlers(broker) -> dict:
    rotation = itertools.count()

    async def heartbeat(connection, request):
        body = request.body
        answer = broker.groups.heartbeat(
            body.group_id, body.member_id, body.member_epoch, body.subscribed_topic_names, now_ms(),
            body.rack_id, request.header.client_id or "", connection.client_host)
        if answer.error == Error.NONE and broker.share_config.profile != "kip":
            _initialize_subscribed(broker, body.group_id, answer.member_id)
        assignment = None
        if answer.assignment is not None:
            assignment = {"topic_partitions": [{"topic_id": topic_id_of(topic), "partitions": partitions}
                                               for topic, partitions in sorted(answer.assignment.items())]}
        return reply(request, throttle_time=0, error_code=answer.error, member_id=answer.member_id,
                     member_epoch=answer.member_epoch, heartbeat_interval=broker.config.heartbeat_interval_ms,
                     assignment=assignment)

    async def describe(connection, request):
        return reply(request, throttle_time=0, groups=[_describe_group(broker, group_id) for group_id in request.body.group_ids])

    async def share_fetch(connection, request):
        body = request.body
        group, member = body.group_id or "", body.member_id or ""
        if not _valid_member_id(member):
            return _share_fetch_reply(broker, request, Error.INVALID_REQUEST, {}, [])
        renew = _renews(request)
        if renew and (body.max_bytes or body.min_bytes or body.max_records or body.max_wait.total_seconds()):
            return _share_fetch_reply(broker, request, Error.INVALID_REQUEST, {}, [])   # KIP-1222: all must be 0
        acquire_mode = body.share_acquire_mode if request.api_version >= 2 else BATCH_OPTIMIZED
        if acquire_mode not in (BATCH_OPTIMIZED, RECORD_LIMIT):
            return _share_fetch_reply(broker, request, Error.INVALID_REQUEST, {}, [])
        wanted, unknown = _partitions(broker, body.topics)
        forget = [str(TopicPartition(topic.name, partition)) for forgotten in body.forgotten_topics_data
                  if (topic := broker.topics.get_by_id(forgotten.topic_id)) for partition in forgotten.partitions]
        acks = _acknowledgements(wanted, request.api_version)
        at_ms = now_ms()
        answer = broker.engine.share_fetch_session(group, member, body.share_session_epoch, list(map(str, wanted)),
                                                   forget, _flatten(acks), at_ms)
        if answer.error != Error.NONE or not answer.process:
            return _share_fetch_reply(broker, request, answer.error, {}, unknown)
        results = _apply_session_answer(broker, connection, group, member, answer, acks, at_ms,
                                        "acknowledge_error_code", renew)
        if not answer.closed and not renew:   # a renewing ShareFetch fetches nothing (KIP-1222)
            readable = []
            # SS-19: only the session's partitions (as this request left it) are fetched, in the order of their names.
            for tp in map(TopicPartition.parse, sorted(answer.partitions)):
                if broker.engine.initialized(group, tp):
                    readable.append(tp)
                else:
                    results.setdefault(tp, {})["error_code"] = Error.UNKNOWN_SERVER_ERROR
            await _acquire(broker, group, member, readable, body, results, next(rotation), acquire_mode == RECORD_LIMIT)
        return _share_fetch_reply(broker, request, Error.NONE, results, unknown)

    async def share_acknowledge(connection, request):
        body = request.body
        group, member = body.group_id or "", body.member_id or ""
        if not _valid_member_id(member):
            return reply(request, throttle_time=0, error_code=Error.INVALID_REQUEST, responses=[], node_endpoints=[])
        wanted, unknown = _partitions(broker, body.topics)
        acks = _acknowledgements(wanted, request.api_version)
        at_ms = now_ms()
        answer = broker.engine.share_acknowledge_session(group, member, body.share_session_epoch, _flatten(acks), at_ms)
        results: dict[TopicPartition, dict] = {}
        if answer.error == Error.NONE and answer.process:
            results = _apply_session_answer(broker, connection, group, member, answer, acks, at_ms, "error_code",
                                            _renews(request))
        responses = _by_topic(broker, results, unknown, {"error_code": Error.UNKNOWN_TOPIC_ID})
        lock_ms = broker.engine.lock_duration_ms(group) if answer.error == Error.NONE else 0   # v2 only
        return reply(request, throttle_time=0, error_code=answer.error, responses=responses, node_endpoints=[],
                     acquisition_lock_timeout=lock_ms)

    return {76: (1, 1, heartbeat), 77: (1, 1, describe), 78: (1, 2, share_fetch), 79: (1, 2, share_acknowledge)}


def _renews(request) -> bool:
    """The request's IsRenewAck (version 2 on; earlier versions cannot renew)."""
    return request.api_version >= 2 and request.body.is_renew_ack


def _apply_session_answer(broker, connection, group: str, member: str, answer, acks: dict, at_ms: int,
                          error_field: str, renew: bool) -> dict[TopicPartition, dict]:
    """After an accepted session request: its acknowledgements (per-partition errors under
    `error_field`), then the release of the member's records if the session closed."""
    broker.engine.session_used(connection, group, member, answer)
    results = {tp: {error_field: _acknowledge(broker, group, member, tp, batches, at_ms, renew)}
               for tp, batches in acks.items()}
    if answer.release:
        broker.engine.release_member(group, member, at_ms, answer.released)
        broker.notify_changed()
    return results


def _partitions(broker, topics) -> tuple[dict, list]:
    """{TopicPartition: (topic, request partition)} for known topic ids, and the unknown (topic id, partition)s."""
    wanted, unknown = {}, []
    for requested in topics:
        topic = broker.topics.get_by_id(requested.topic_id)
        for part in requested.partitions:
            if topic is None or not 0 <= part.partition_index < topic.partitions:
                unknown.append((requested.topic_id, part.partition_index))
            else:
                wanted[TopicPartition(topic.name, part.partition_index)] = (topic, part)
    return wanted, unknown


def acknowledgement_batches(wire_batches, version: int) -> list[tuple[int, int, str]] | None:
    """Wire batches of a request `version` -> [(first, last, type name)], runs of one type; None if malformed
    (INVALID_REQUEST). RENEW (4) exists from version 2 on."""
    batches: list[tuple[int, int, str]] = []
    for batch in wire_batches:
        types = batch.acknowledge_types
        names = [ACK_TYPES_BY_WIRE.get(code) if version >= 2 or code != RENEW else None for code in types]
        if not types or None in names:
            return None
        if len(types) == 1:
            batches.append((batch.first_offset, batch.last_offset, names[0]))
            continue
        if batch.last_offset - batch.first_offset + 1 != len(types):
            return None
        for name, run in itertools.groupby(enumerate(names), key=lambda item: item[1]):
            offsets = [index for index, _ in run]
            batches.append((batch.first_offset + offsets[0], batch.first_offset + offsets[-1], name))
    return batches


def _acknowledgements(wanted: dict, version: int) -> dict[TopicPartition, list[tuple[int, int, str]] | None]:
    """{tp: batches} for the partitions that carry acknowledgements; None marks malformed ones."""
    return {tp: acknowledgement_batches(part.acknowledgement_batches, version)
            for tp, (_, part) in wanted.items() if part.acknowledgement_batches}


def _flatten(acks: dict) -> list[tuple[str, int, int, str]]:
    """The acknowledgements as the session names them: ("topic:partition", first, last, type)."""
    return [(str(tp), first, last, ack_type) for tp, batches in acks.items() for first, last, ack_type in batches or ()]


def _acknowledge(broker, group: str, member: str, tp: TopicPartition, batches: list | None, at_ms: int,
                 renew: bool) -> str:
    if batches is None:
        return Error.INVALID_REQUEST
    if not broker.engine.initialized(group, tp) or (broker.share_config.profile != "kip"
                                                     and not broker.engine.loaded(group, tp)):
        # SharePartitionManager.acknowledge: no such share-partition in the leader's cache, which only a ShareFetch
        # of the partition fills (Kafka 4.2; found by conform --compare)
        return Error.UNKNOWN_TOPIC_OR_PARTITION
    return broker.engine.acknowledge(group, member, tp, batches, at_ms, renew)


def _valid_member_id(member: str) -> bool:
    """Kafka's KafkaApis.isMemberIdValid: not empty, at most the 36 characters of a printed UUID."""
    return 0 < len(member) <= MEMBER_ID_MAX_CHARS


async def _acquire(broker, group: str, member: str, partitions: list[TopicPartition], body, results: dict, turn: int,
                   record_limit: bool) -> None:
    """Acquire up to max_records over the session's partitions (each gets what the ones before it left,
    as Kafka's ShareFetchUtils), waiting up to max_wait for some."""
    deadline_ms = now_ms() + min(int(body.max_wait.total_seconds() * 1000), MAX_WAIT_MS)
    if partitions:
        start = turn % len(partitions)
        partitions = partitions[start:] + partitions[:start]  # no partition starves the others
    while partitions:
        budget = body.max_records if body.max_records > 0 else 500
        for tp in partitions:
            if budget <= 0 or not broker.engine.has_session(group, member):
                break
            try:
                acquired = broker.engine.acquire(group, member, tp, budget, now_ms(), record_limit)
            except PersisterError as error:
                results.setdefault(tp, {})["error_code"] = error.error
                continue
            results.get(tp, {}).pop("error_code", None)   # loaded since an earlier try in this wait
            if acquired:
                budget -= sum(last - first + 1 for first, last, _ in acquired)
                results.setdefault(tp, {})["acquired"] = acquired
        remaining_ms = deadline_ms - now_ms()
        if any("acquired" in result for result in results.values()) or remaining_ms <= 0:
            return
        await broker.wait_changed(remaining_ms)   # SP-28: records produced or released wake a waiting fetch


def _share_fetch_reply(broker, request, error: str, results: dict, unknown: list):
    lock_ms = broker.engine.lock_duration_ms(request.body.group_id)
    partitions = {tp: _fetched_partition(broker, tp, result) for tp, result in results.items()}
    responses = _by_topic(broker, partitions, unknown, {"error_code": Error.UNKNOWN_TOPIC_ID,
                                                        "acknowledge_error_code": 0, "records": b"",
                                                        "acquired_records": []})
    return reply(request, throttle_time=0, error_code=error,
                 acquisition_lock_timeout=lock_ms if error == Error.NONE else 0, responses=responses, node_endpoints=[])


def _initialize_subscribed(broker, group_id: str, member_id: str) -> None:
    """kafka-4.2: the share-partitions of the topics the member subscribes to get a state (start offset -1) where
    they have none, as Kafka's group coordinator initializes them after the heartbeat (ShareEngine)."""
    member = broker.groups.groups[group_id].members.get(member_id)   # None: the member left
    if member is None:
        return
    partitions = [TopicPartition(name, index) for name in member.subscribed if (topic := broker.topics.get(name))
                  for index in range(topic.partitions)]
    broker.engine.initialize_subscribed(group_id, partitions, now_ms())


def _fetched_partition(broker, tp: TopicPartition, result: dict) -> dict:
    acquired = result.get("acquired", [])
    records = b""
    if acquired:   # SP-48: the whole log batches from the first acquired record's to the last's
        records = broker.partition_log(tp.topic, tp.partition).read_range(acquired[0][0], acquired[-1][1])
    return {"error_code": result.get("error_code", Error.NONE),
            "acknowledge_error_code": int(error_code(result.get("acknowledge_error_code", Error.NONE))),
            "records": records, "acquired_records": [{"first_offset": first, "last_offset": last, "delivery_count": count}
                                                     for first, last, count in acquired]}


def _by_topic(broker, partitions: dict[TopicPartition, dict], unknown: list, unknown_fields: dict) -> list[dict]:
    """Group per-partition answers by topic id, adding the leader and the unknown topic ids' errors."""
    leader = {"leader_id": broker.config.node_id, "leader_epoch": 0}
    topics: dict = {}
    for tp, fields in partitions.items():
        topics.setdefault(topic_id_of(tp.topic), []).append({"partition_index": tp.partition, "current_leader": leader,
                                                             **fields})
    for topic_id, partition in unknown:
        topics.setdefault(topic_id, []).append({"partition_index": partition, "current_leader": leader, **unknown_fields})
    return [{"topic_id": topic_id, "partitions": parts} for topic_id, parts in topics.items()]


def _describe_group(broker, group_id: str) -> dict:
    group = broker.groups.groups.get(group_id)
    if group is None:
        return {"error_code": Error.GROUP_ID_NOT_FOUND, "error_message": f"Group {group_id} not found.",
                "group_id": group_id, "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1,
                "assignor_name": "simple", "members": []}
    members = [{"member_id": member.member_id, "rack_id": member.rack_id, "member_epoch": member.epoch,
                "client_id": member.client_id, "client_host": member.client_host,
                "subscribed_topic_names": list(member.subscribed),
                "assignment": {"topic_partitions": [{"topic_id": topic_id_of(topic), "topic_name": topic,
                                                     "partitions": parts} for topic, parts in sorted(member.assignment.items())]}}
               for member in group.members.values()]
    return {"error_code": Error.NONE, "group_id": group_id, "group_state": "Stable" if members else "Empty",
            "group_epoch": group.epoch, "assignment_epoch": group.assignment_epoch, "assignor_name": "simple",
            "members": members}
