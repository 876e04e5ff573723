"""Apache Kafka itself, run beside the reference broker: its jars through Maven (runtime.py), a KRaft cluster on
loopback that kipcheck starts, kills -9 and restarts (cluster.py)."""
