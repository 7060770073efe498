"""Real receivers the notification tests start: an HTTP server recording POST bodies, an SMTP server recording mail.

The HTTP receiver stands in for a Slack incoming webhook and for PagerDuty's
Events API (both take one JSON POST); it can be told to answer 500 or to
answer late, to play a failing or a slow channel. A port nothing listens on
plays a channel that is down.
"""

from __future__ import annotations

import email
import email.policy
import json
import socket
import threading
import time
from contextlib import closing
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller


class HttpReceiver:
    """Records every POST (path and JSON body); answers ``status`` after ``delay`` seconds.

    ``echo``: a failing answer repeats the request's body, as some receivers quote what they refused.
    """

    def __init__(self, status: int = 200, delay: float = 0.0, echo: bool = False):
        self.status, self.delay, self.echo = status, delay, echo
        self.posts: list[tuple[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server hook's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.delay:
                    time.sleep(receiver.delay)
                receiver.posts.append((self.path, json.loads(body)))
                if receiver.status < 300:
                    answer = b'{"status": "success"}'
                else:
                    answer = b"refused: " + body if receiver.echo else b"internal error"
                head = (f"HTTP/1.1 {receiver.status} {HTTPStatus(receiver.status).phrase}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(answer)}\r\n"
                        f"Connection: close\r\n\r\n").encode()
                try:
                    # MSG_NOSIGNAL: a sender that gave up waiting (a slow channel) must not SIGPIPE the test
                    # process, whose SIGPIPE the command line's tests gave back its default
                    self.connection.sendall(head + answer, socket.MSG_NOSIGNAL)
                except OSError:
                    pass
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.server.server_port}{path}"

    def bodies(self, path: str | None = None) -> list[Any]:
        return [body for p, body in self.posts if path is None or p == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Recorder:
    def __init__(self):
        self.mails: list[tuple[list[str], email.message.EmailMessage]] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        mail = email.message_from_bytes(envelope.original_content or envelope.content, policy=email.policy.default)
        self.mails.append((list(envelope.rcpt_tos), mail))
        return "250 OK"


class SmtpReceiver:
    """An SMTP server (aiosmtpd) on 127.0.0.1 that records each mail with its envelope recipients.

    ``server_settings`` go to aiosmtpd's server: a TLS context for STARTTLS, an authenticator.
    """

    def __init__(self, **server_settings):
        self.recorder = _Recorder()
        self.controller = Controller(self.recorder, hostname="127.0.0.1", port=free_port(), **server_settings)
        self.controller.start()

    @property
    def port(self) -> int:
        return self.controller.port

    @property
    def mails(self) -> list[tuple[list[str], email.message.EmailMessage]]:
        return self.recorder.mails

    def close(self) -> None:
        self.controller.stop()


def free_port() -> int:
    """A port nothing listens on (bound, then released): connecting to it is refused."""
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
