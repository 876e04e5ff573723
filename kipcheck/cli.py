"""The `kipcheck` command line: one subcommand per module in kipcheck/commands/."""

from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand name -> module. Each module has SUMMARY, DESCRIPTION, configure(parser) and run(args) -> exit code.
COMMANDS = {
    "conformance": "kipcheck.commands.conformance",
    "check": "kipcheck.commands.check",
    "broker": "kipcheck.commands.broker",
    "prove": "kipcheck.commands.prove",
    "spec": "kipcheck.commands.spec",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kipcheck",
        description=(
            "The formal reference and test oracle for cooperative consumption in Kafka: "
            "share groups (KIP-932), revoke-delay polling (KIP-983), individual commit with "
            "key-range assignment, and expansion by linear hashing (KIP-287)."
        ),
    )
    from kipcheck import __version__

    parser.add_argument("--version", action="version", version=f"kipcheck {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(
            name, help=module.SUMMARY, description=module.DESCRIPTION,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: not an error of ours. Point stdout at
        # devnull so the interpreter's final flush does not fail again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
