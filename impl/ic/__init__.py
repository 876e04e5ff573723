"""Individual commit (the cooperative-processing proposal, seed 000) as a library: the coordinator's state
and its two logs (coordinator.py), the range structure (ranges.py), the client's commit accumulation and
request splitting (client.py), and key-range filtering of raw record batches for Fetch (filtering.py)."""
