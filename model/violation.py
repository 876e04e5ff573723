"""The one exception every model raises when an observed answer is not allowed."""


class Violation(Exception):
    """An observed answer that the model does not allow.

    `clause` is the spec clause id the answer breaks, `allowed` says in words
    what the model would have accepted, `observed` what it was given.
    """

    def __init__(self, clause: str, allowed: str, observed: str) -> None:
        super().__init__(f"{clause}: allowed {allowed}; observed {observed}")
        self.clause = clause
        self.allowed = allowed
        self.observed = observed
