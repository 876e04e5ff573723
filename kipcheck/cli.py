"""The `kipcheck` command line: one subcommand per module in kipcheck/commands/."""

from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand name -> (module, one-line summary). Each module has DESCRIPTION, configure(parser) and
# run(args) -> exit code. Only the module of the command being run is imported: `kipcheck check` is
# called once per file in CI, and importing every command (asyncio, the broker, z3) would triple its start-up.
COMMANDS = {
    "conform": ("kipcheck.commands.conform", "probe a broker from the outside: a verdict per machine and clause"),
    "conformance": ("kipcheck.commands.conform", "the same as conform (its former name)"),
    "check": ("kipcheck.commands.check", "judge trace files (exit 0 all allowed, 1 a violation, 2 malformed input)"),
    "broker": ("kipcheck.commands.broker", "run the reference broker: share and consumer groups for real Kafka clients, with durable logs"),
    "prove": ("kipcheck.commands.prove", "prove the theorems behind the models with z3 (exit 0 all hold, 1 otherwise)"),
    "kafka": ("kipcheck.commands.kafka", "Apache Kafka itself, fetched through Maven: start a cluster, run its tools"),
    "record": ("kipcheck.commands.record", "a proxy between applications and Kafka that writes traces of what crosses it, and judges them (--check)"),
    "spec": ("kipcheck.commands.spec", "list the spec clauses (ids, seeds, profiles); --show ID prints one"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only `command`'s own options are configured (its module is the only one imported)."""
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
    for name, (module_name, summary) in COMMANDS.items():
        if name != command:
            subparsers.add_parser(name, help=summary)
            continue
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(
            name, help=summary, description=module.DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
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
