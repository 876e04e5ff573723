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


DESCRIPTION = ("The formal reference and test oracle for cooperative consumption in Kafka: "
               "share groups (KIP-932), revoke-delay polling (KIP-983), individual commit with "
               "key-range assignment, and expansion by linear hashing (KIP-287).")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser, listing every command (none imported): for `kipcheck`, --help and --version."""
    parser = argparse.ArgumentParser(prog="kipcheck", description=DESCRIPTION)
    from kipcheck import __version__

    parser.add_argument("--version", action="version", version=f"kipcheck {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, summary) in COMMANDS.items():
        subparsers.add_parser(name, help=summary)
    return parser


def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one command, built alone: `kipcheck check FILE` (run once per file in CI) pays for
    no other command's parser."""
    module = importlib.import_module(COMMANDS[name][0])
    parser = argparse.ArgumentParser(prog=f"kipcheck {name}", description=module.DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    module.configure(parser)
    parser.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in COMMANDS:
        args = command_parser(argv[0]).parse_args(argv[1:])
    else:
        parser = build_parser()
        parser.parse_args(argv)  # exits for --help, --version, an unknown command; a known one is handled above
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
