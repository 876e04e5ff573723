"""Kafka's wire, for every part of impl/ that speaks it: the broker, the Python consumer, the key-range filter.

Modules:
- `codec`:       frames in and out through kio; `build` makes typed kio messages from plain values.
- `schemas`:     kio's request and response schemas with individual commit's tagged fields (spec/ic.md IC-20).
- `errors`:      error names to wire codes and back, the seed's own codes included (IC-17).
- `frame_check`: impossible counts and lengths refused before kio decodes a request (KAFKA-14063).
- `batches`:     v2 record batches: framing, header fields, validation, transaction markers.
"""
