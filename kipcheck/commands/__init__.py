"""The subcommands of the `kipcheck` command line, one module each."""


def stop_on_signals():
    """An asyncio event set by SIGTERM or SIGINT (the long-running commands stop cleanly on either)."""
    import asyncio
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stop.set)
    return stop
