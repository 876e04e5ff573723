"""Spark connectors with share-group and key-range semantics (PySpark's Python data source API).

- `kipcheck-share` (share.py): reads topics through a KIP-932 share group,
  streaming (records accepted once Spark committed their micro-batch, staged
  for replay) and batch.
- `kipcheck-keyrange` (keyrange.py): each partition read as k hashed key
  ranges, one Spark task each, fetched by key range from the broker (or
  filtered in the task); the group's offsets committed as individual commits
  when Spark commits a micro-batch (commit.py).

    from kipcheck.impl.spark import local_session, register
    spark = local_session("local[2]")
    register(spark)

Modules: options (option parsing), rows (the Kafka schema as Arrow),
staging (the share connector's replay store), commit (RangeCommitter,
individual commits through impl/consumer), traces (what the clients saw, for the
oracle), session (a quiet local SparkSession), standalone (a Spark
standalone master and workers on loopback, for tests and benchmarks of
`kipcheck check --spark` on a cluster). pyspark is imported only by share,
keyrange, session and standalone.
"""

from kipcheck.impl.spark.session import local_session, register

__all__ = ["local_session", "register"]
