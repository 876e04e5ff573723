"""kipcheck: the formal reference and test oracle for cooperative consumption in Kafka.

The folders spec/, model/, impl/ and oracle/ are importable as kipcheck.spec,
kipcheck.model, kipcheck.impl and kipcheck.oracle.
"""

__version__ = "0.1.0"
