"""The real Kernelsight server plus one test-only command, ``ksfuzz.pendingFutures``: how
many futures pygls' protocol still holds in ``_request_futures`` (a leak detector for
tests/test_regressions_fuzz.py). Run as ``python tests/fuzz/counting_server.py``."""
from __future__ import annotations


def main() -> None:
    from kernelsight.server.app import build_server

    server = build_server()

    @server.command("ksfuzz.pendingFutures")
    def pending_futures(ls, *args):
        return len(ls.protocol._request_futures)

    server.start_io()


if __name__ == "__main__":
    main()
