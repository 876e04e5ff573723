"""`--target wire://HOST:PORT`: any broker with share groups, probed over the wire as it runs.

The runner did not start it, so it can neither restart it (XM-1 and SP-26 are
not observable) nor read its traces; its share settings reach the runner by
--set, under Kafka's names, and default to Kafka's.
"""

from __future__ import annotations

import re

from kipcheck.oracle.conformance.targets import Target, TargetError, TargetOptions

WIRE = re.compile(r"^wire://(?P<host>[^:/\s]+):(?P<port>\d{1,5})$")


class WireTarget(Target):
    forms = {"wire://HOST:PORT": "any broker with share groups (a single broker, or\n"
                                 "one leading every partition of the probes' topics);\n"
                                 "tell the runner its share settings with --set"}

    def __init__(self, text: str, options: TargetOptions):
        super().__init__(text, options)
        match = WIRE.match(text)
        port = int(match["port"])
        if not 0 < port < 65536:
            raise TargetError(f"port {port} of {text!r} is not a TCP port (1..65535)")
        self.address = (match["host"], port)
        self.name = f"wire://{match['host']}:{port}"

    @classmethod
    def accepts(cls, text: str) -> bool:
        return WIRE.match(text) is not None
