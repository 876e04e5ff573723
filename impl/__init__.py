"""The real implementation: a broker speaking Kafka's wire protocol, the rules it serves, a client, Spark connectors.

Layers, lowest first. A package imports the floor, kipcheck.model, and only
the packages its layer names here; nothing imports a package of a higher
layer, and no two modules of impl/ import each other, even through others
(tests/test_layers.py holds impl/ to all of this). impl/ never imports oracle/.

1. The floor, the plumbing every feature shares; it imports nothing else of impl/:
   - `storage/`:          every byte written to disk, within a bound of open files;
   - `wire/`:             Kafka's wire through kio: frames, schemas with individual
                          commit's fields, error codes, record batches;
   - `tracing.py`:        trace files (shared/TRACE-FORMAT.md): the writer every machine's traces use;
   - `settings.py`:       settings under Kafka's names, parsed alike by every config;
   - `topic_partition.py`: TopicPartition, "topic:partition" as traces name it.
2. The rules, one package per protocol, none a client or a server:
   - `share/`:  KIP-932 share groups (share-partitions, sessions, the share coordinator);
   - `groups/`: classic and KIP-848 consumer groups, server assignors, committed offsets; its
                KIP-287 assignor builds on `expansion/`;
   - `ic/`:     individual commit; it builds on `groups/` (its commits live in the
                groups' offsets log) and holds the consumer's side of it too;
   - `expansion/`: KIP-287: the linear-hashing partitioner, the job record and its
                store, the assignor's moves, the producer, the expansion tool and the
                processor library, over swappable readers (confluent-kafka's Consumer among them).
3. `consumer/`: the Python consumer (KIP-848, KIP-983's revoke-delay poll, key-range
   fetch, individual commit through `ic/`). The client never imports the broker.
4. `broker/`: the reference broker, carrying `share/`, `groups/` and `ic/` over the wire (and
   reading KIP-287 job records for `groups/`' assignor through `expansion/`).
   Its request handlers (`broker/handlers/`) are given the broker; they never import broker.py.
5. `spark/`: the Spark connectors, reading through `consumer/`.
   `job/`: a KIP-287 job's groups (KIP-848 and classic) and reader over the wire, through
   `consumer/` and `expansion/`.
"""
