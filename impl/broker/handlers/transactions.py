"""Transaction APIs for transactional producers: AddPartitionsToTxn (v0-3) and EndTxn (v0-3).

InitProducerId with a transactional id and FindCoordinator of type
transaction are answered by handlers/cluster.py through the same coordinator
(impl/broker/transactions.py). These are the calls of confluent-kafka's
transactional Producer (init_transactions, begin_transaction, produce,
commit_transaction, abort_transaction); AddOffsetsToTxn and TxnOffsetCommit
(send_offsets_to_transaction) are not served.
"""

from __future__ import annotations

from kipcheck.impl.wire.codec import reply
from kipcheck.model.errors import Error


def handlers(broker) -> dict:
    async def add_partitions_to_txn(connection, request):
        body = request.body
        wanted = [(topic.name, partition) for topic in body.v3_and_below_topics for partition in topic.partitions]
        unknown = [(name, partition) for name, partition in wanted if broker.find_log(name, partition) is None]
        error = Error.UNKNOWN_TOPIC_OR_PARTITION if unknown else broker.transactions.add_partitions(
            body.v3_and_below_transactional_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch, wanted)
        # Kafka answers a refused request's other partitions OPERATION_NOT_ATTEMPTED.
        results = [{"name": topic.name, "results_by_partition": [
            {"partition_index": partition, "partition_error_code": _partition_error(error, unknown, topic.name, partition)}
            for partition in topic.partitions]} for topic in body.v3_and_below_topics]
        return reply(request, throttle_time=0, results_by_topic_v3_and_below=results)

    async def end_txn(connection, request):
        body = request.body
        error = broker.transactions.end(body.transactional_id, body.producer_id, body.producer_epoch, body.committed)
        if error == Error.PRODUCER_FENCED and request.api_version < 2:
            error = Error.INVALID_PRODUCER_EPOCH  # PRODUCER_FENCED is answered from EndTxn v2 on
        return reply(request, throttle_time=0, error_code=error)

    return {24: (0, 3, add_partitions_to_txn), 26: (0, 3, end_txn)}


def _partition_error(error: str, unknown: list[tuple[str, int]], topic: str, partition: int) -> str:
    if not unknown:
        return error
    return Error.UNKNOWN_TOPIC_OR_PARTITION if (topic, partition) in unknown else Error.OPERATION_NOT_ATTEMPTED
