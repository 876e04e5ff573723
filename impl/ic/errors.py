"""The seed's new error names and the wire codes kipcheck gives them (spec/ic.md IC-17).

The seed numbers them 88-92, which Kafka already uses (UNSTABLE_OFFSET_COMMIT(88) ...
DUPLICATE_RESOURCE(92)); Kafka 4.2's highest code is 133. kipcheck keeps the seed's
order and moves the block to 1088-1092, far above Kafka's codes and their growth.
kio's ErrorCode enum does not know them: the wire layer writes them as plain int16.
"""

from __future__ import annotations

from kipcheck.model.ic import MAX_REACHED, NOT_ALLOWED, TOO_OLD
from kipcheck.model.key_hash import CONSUMER_RANGE_FETCH_NOT_ACCEPTED, TOPIC_RANGE_FETCH_NOT_ALLOWED

WIRE_CODES = {
    NOT_ALLOWED: 1088,
    TOPIC_RANGE_FETCH_NOT_ALLOWED: 1089,
    CONSUMER_RANGE_FETCH_NOT_ACCEPTED: 1090,
    TOO_OLD: 1091,
    MAX_REACHED: 1092,
}
