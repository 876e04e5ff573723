"""The seed's new error names and the wire codes kipcheck gives them (spec/ic.md IC-17).

The seed numbers them 88-92, which Kafka already uses (UNSTABLE_OFFSET_COMMIT(88) ...
DUPLICATE_RESOURCE(92)); Kafka 4.2's highest code is 133. kipcheck keeps the seed's
order and moves the block to 1088-1092, far above Kafka's codes and their growth.
kio's ErrorCode enum does not know them: the wire layer writes them as plain int16.
"""

from __future__ import annotations

INDIVIDUAL_COMMIT_NOT_ALLOWED = "INDIVIDUAL_COMMIT_NOT_ALLOWED"
TOPIC_RANGE_FETCH_NOT_ALLOWED = "TOPIC_RANGE_FETCH_NOT_ALLOWED"
CONSUMER_RANGE_FETCH_NOT_ACCEPTED = "CONSUMER_RANGE_FETCH_NOT_ACCEPTED"
INDIVIDUAL_COMMIT_TOO_OLD = "INDIVIDUAL_COMMIT_TOO_OLD"
MAX_INDIVIDUAL_COMMIT_REACHED = "MAX_INDIVIDUAL_COMMIT_REACHED"

WIRE_CODES = {
    INDIVIDUAL_COMMIT_NOT_ALLOWED: 1088,
    TOPIC_RANGE_FETCH_NOT_ALLOWED: 1089,
    CONSUMER_RANGE_FETCH_NOT_ACCEPTED: 1090,
    INDIVIDUAL_COMMIT_TOO_OLD: 1091,
    MAX_INDIVIDUAL_COMMIT_REACHED: 1092,
}
