"""A share consumer that acquires records and holds them until it is killed (the consumer-killed scenario).

    python -m kipcheck.oracle.conformance.scenarios.holder BOOTSTRAP GROUP TOPIC

Prints one JSON line, the [partition, offset, delivery_count] of the records
it received in its first non-empty poll, then holds them unacknowledged
(explicit mode, no commit) until killed.
"""

from __future__ import annotations

import json
import sys
import time

from kipcheck.oracle.conformance.scenarios.clients import poll_records, share_consumer

HOLD_LIMIT_S = 600


def main(argv: list[str]) -> int:
    bootstrap, group, topic = argv
    consumer = share_consumer(bootstrap, group, [topic], explicit=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        records = poll_records(consumer)
        if records:
            print(json.dumps([[m.partition(), m.offset(), m.delivery_count()] for m in records]), flush=True)
            time.sleep(HOLD_LIMIT_S)
            return 0
    print("[]", flush=True)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
