"""Broker conformance: end-to-end scenarios with real Kafka clients against the reference broker.

`scenarios.run_scenarios(work_root)` runs each scenario against an embedded
broker (embedded.EmbeddedBroker: a subprocess on a free loopback port with
its own data and trace dirs), checks what the clients saw, and judges every
trace the broker wrote; `kipcheck conformance` runs them after the bundled
example traces, and tests/test_e2e_broker.py runs the same scenarios.
"""
