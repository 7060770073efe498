"""A webhook that redirects fails the delivery; a huge answer is read only as a bounded prefix."""

import http.server
import threading
import time

import pytest

from atlasmart_dagster.ops.response.notifications.channels import SendFailed, post_json


class _Receiver(http.server.BaseHTTPRequestHandler):
    written = 0  # bytes of the huge answer the receiver got out before the sender hung up

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:1/elsewhere")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(1 << 30))
        self.end_headers()
        chunk = b"x" * (1 << 20)
        try:
            for _ in range(1024):
                self.wfile.write(chunk)
                _Receiver.written += len(chunk)
        except OSError:
            pass


@pytest.fixture
def receiver():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_redirect_is_a_failed_delivery_never_followed(receiver):
    with pytest.raises(SendFailed) as failed:
        post_json(f"{receiver}/redirect", {"text": "x"}, 5)
    assert "302" in failed.value.reason and not failed.value.permanent


def test_a_huge_answer_is_not_read_whole(receiver):
    start = time.monotonic()
    post_json(f"{receiver}/huge", {"text": "x"}, 5)
    assert time.monotonic() - start < 3
    time.sleep(0.2)
    assert _Receiver.written < 64 << 20  # read whole, all 1 GiB would have gone out
