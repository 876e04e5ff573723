"""kipcheck: the formal reference and test oracle for cooperative consumption in Kafka.

The folders spec/, model/, impl/ and oracle/ are importable as kipcheck.spec,
kipcheck.model, kipcheck.impl and kipcheck.oracle. `assert_conforms` judges a
test's own traces (kipcheck.testing.assertions; imported when first called).
"""

__version__ = "0.1.0"


def assert_conforms(path_or_steps, machine=None, profile=None, config=None) -> None:
    """Fail (AssertionError) unless the trace conforms: see kipcheck.testing.assertions.assert_conforms."""
    __tracebackhide__ = True
    from kipcheck.testing.assertions import assert_conforms as judged

    judged(path_or_steps, machine=machine, profile=profile, config=config)
