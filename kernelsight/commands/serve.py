"""``kernelsight serve``: the language server over stdio (default) or TCP (``--tcp HOST:PORT``,
for debugging with a client that connects to a socket)."""
from __future__ import annotations

import argparse
import logging
import os
import sys


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stdio", action="store_true",
                        help="talk LSP over stdin/stdout (the default; accepted for clients "
                             "that always pass it)")
    parser.add_argument("--tcp", metavar="HOST:PORT",
                        help="listen on a TCP socket instead of stdio, e.g. 127.0.0.1:2087")
    parser.add_argument("--log-file", metavar="PATH",
                        help="also write the server's own debug log to this file")


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--tcp expects HOST:PORT (e.g. 127.0.0.1:2087), got {text!r}")
    return host or "127.0.0.1", int(port)


def run(args: argparse.Namespace) -> int:
    """Serve until the client sends exit. Returns 0, or 2 for a bad --tcp value."""
    address = None
    if args.tcp:
        try:
            address = _host_port(args.tcp)
        except ValueError as exc:
            print(f"kernelsight serve: {exc}", file=sys.stderr)
            return 2
    if args.log_file:
        logging.basicConfig(filename=args.log_file, level=logging.DEBUG,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from kernelsight.server import startup

    startup.pause_gc()  # until `initialize` is answered (server/startup.py says why)
    startup.install()
    from kernelsight.server.app import build_server  # pygls loads only for this subcommand

    server = build_server()
    code = 0
    try:
        if address is not None:
            server.start_tcp(*address)
        else:
            server.start_io()
    except SystemExit as exc:  # pygls ends the process this way on `exit`
        code = exc.code if isinstance(exc.code, int) else 0
    finally:
        server.analyzer.shutdown()
    # An analysis thread stuck in a long parse must not hold the process open after `exit`
    # (interpreter shutdown joins pool threads); nothing is left to flush but stdio.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the client may have closed the pipe already
            pass
    os._exit(code)
