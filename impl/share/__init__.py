"""Share groups for real: share-partition manager, share session cache, share coordinator with a durable log.

The fast, real counterpart of model/share_partition.py, model/share_session.py
and model/share_state.py; tests/test_differential_share.py diffs the two by
recording this engine's traces and judging them with the oracle. The broker
(impl/broker/) drives it; nothing here does network I/O or reads a clock:
every call takes `now_ms` from the caller, so a test can use a virtual clock.

Modules (each documents its API in its own docstring):

- `config`:      ShareConfig, parsed from Kafka's own config names
                 (`ShareConfig.from_properties({...})`), plus the profile
                 ("kafka-4.2" for the broker, or "kip").
- `partition`:   SharePartition, the in-flight records of one
                 (group, topic, partition): on_append / acquire / acknowledge /
                 release_member / expire_locks / next_deadline_ms / spso /
                 speo / states(). In-flight batches, not per-record objects.
- `sessions`:    ShareSessionCache, the share sessions of one broker:
                 share_fetch / share_acknowledge / close_member -> SessionAnswer
                 (error, whether to release the member's records).
- `coordinator`: ShareCoordinator, share-state persistence on a durable,
                 CRC-checked, fsynced append-only log in a data dir
                 (initialize / write / read, replay on open); the log itself
                 is impl/storage's DurableLog, written through impl/storage
                 like every file the broker writes.
- `tracing`:     TraceWriter, the engine's own traces in
                 shared/TRACE-FORMAT.md (share-partition, share-session,
                 share-state), so `kipcheck check` can judge a live run.

impl/ never imports oracle/ (tests/test_layers.py enforces it).
"""
