"""shutdown must be answered even when cancelling a pending future removes it from the
protocol's table (the leak fix's done-callback does exactly that)."""
from concurrent.futures import Future

from kernelsight.server.app import build_server


def test_shutdown_cancels_pending_futures_whose_callbacks_change_the_table():
    server = build_server()
    proto = server.protocol
    for i in range(3):
        fut = Future()
        fut.add_done_callback(proto._check_handler_result)
        proto._request_futures[f"pending-{i}"] = fut
    gen = proto.lsp_shutdown(None)
    try:
        while True:
            next(gen)
    except StopIteration:
        pass
    assert proto._shutdown
    assert all(f.cancelled() for f in proto._request_futures.values())
