"""A receiver that drips one byte every 2 s is cut at the attempt's wall-clock deadline (issue 36 item 1)."""

import socket
import threading
import time

import pytest

from atlasmart_dagster.ops.response.notifications.channel_config import Channel
from atlasmart_dagster.ops.response.notifications.channels import SendFailed, post_json, within
from atlasmart_dagster.ops.response.notifications.kinds.webhook import WebhookSettings


@pytest.fixture
def dripping():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def drip(conn):
        try:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 100:
                if stop.is_set():
                    break
                conn.send(bytes([byte]))
                time.sleep(2)
        except OSError:
            pass
        finally:
            conn.close()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/x"
    stop.set()
    server.close()


def test_a_dripping_webhook_is_cut_at_the_deadline_and_fails(dripping):
    channel = Channel("hook", "webhook", 5.0, WebhookSettings(url=dripping))
    start = time.monotonic()
    with pytest.raises(SendFailed) as failed:
        within(channel, post_json, dripping, {"text": "x"}, 5.0)
    took = time.monotonic() - start
    assert 9 < took < 12 and "within 10 s" in failed.value.reason and not failed.value.permanent
