"""The subcommands of the `kipcheck` command line, one module each."""
