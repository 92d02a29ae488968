"""Local stand-ins for where regression alerts go: a Slack Incoming Webhook (HTTP) and an SMTP server.

Standard library only, so that the same file serves in a thread of a test (``with WebhookStandIn() as slack:``)
and as a script in a container on a compose deployment's network (tests/e2e/test_compose_e2e.py), where it prints
each message it receives as one JSON line on stdout (``docker logs``)::

    python3 alert_stand_ins.py --http-port 8025 --smtp-port 2525

The webhook answers every POST as Slack does (200, body ``ok``) and keeps the path and the JSON body. The SMTP
server speaks the part of RFC 5321 a client without TLS or login needs (EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP,
QUIT) and keeps the envelope and the message, with its subject and its text (every part, decoded).
"""

from __future__ import annotations

import argparse
import email
import email.policy
import json
import socketserver
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Record = Callable[[dict[str, Any]], None]


class _Received:
    """What a stand-in received, in order (thread-safe), and an optional callback per message."""

    def __init__(self, on_message: Record | None = None) -> None:
        self._lock = threading.Lock()
        self._messages: list[dict[str, Any]] = []
        self._on_message = on_message

    def add(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._messages.append(message)
        if self._on_message is not None:
            self._on_message(message)

    @property
    def messages(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._messages)


def _webhook_handler(received: _Received) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0)).decode("utf-8", "replace")
            try:
                payload: Any = json.loads(body)
            except ValueError:
                payload = body
            received.add({"channel": "slack", "path": self.path, "json": payload})
            answer = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            pass

    return Handler


def _smtp_handler(received: _Received) -> type[socketserver.StreamRequestHandler]:
    class Handler(socketserver.StreamRequestHandler):
        def reply(self, line: str) -> None:
            self.wfile.write(line.encode() + b"\r\n")
            self.wfile.flush()

        def handle(self) -> None:
            self.reply("220 dlperf-smtp-stand-in ESMTP")
            sender, recipients = "", []
            while True:
                raw = self.rfile.readline()
                if not raw:
                    return
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                verb = line.split(" ", 1)[0].upper()
                if verb == "EHLO":
                    self.reply("250-dlperf-smtp-stand-in")
                    self.reply("250 8BITMIME")
                elif verb == "HELO" or verb in ("NOOP", "VRFY"):
                    self.reply("250 OK")
                elif verb == "MAIL":
                    sender, recipients = line.split(":", 1)[1].strip().strip("<>").split(">")[0], []
                    self.reply("250 OK")
                elif verb == "RCPT":
                    recipients.append(line.split(":", 1)[1].strip().strip("<>").split(">")[0])
                    self.reply("250 OK")
                elif verb == "DATA":
                    self.reply("354 end with <CRLF>.<CRLF>")
                    lines = []
                    while True:
                        data = self.rfile.readline()
                        if not data or data in (b".\r\n", b".\n"):
                            break
                        lines.append(data[1:] if data.startswith(b"..") else data)  # dot-unstuffing
                    received.add(_mail(sender, recipients, b"".join(lines)))
                    self.reply("250 OK queued")
                elif verb == "RSET":
                    sender, recipients = "", []
                    self.reply("250 OK")
                elif verb == "QUIT":
                    self.reply("221 bye")
                    return
                else:
                    self.reply("502 command not implemented")

    return Handler


def _mail(sender: str, recipients: list[str], data: bytes) -> dict[str, Any]:
    """A received message: the envelope, the headers that matter and the text of every part, decoded."""
    message = email.message_from_bytes(data, policy=email.policy.default)
    parts = []
    for part in message.walk():
        if part.get_content_maintype() == "text":
            parts.append({"type": part.get_content_type(), "text": part.get_content()})
    return {
        "channel": "email",
        "from": sender,
        "to": recipients,
        "subject": str(message["Subject"] or ""),
        "header_from": str(message["From"] or ""),
        "header_to": str(message["To"] or ""),
        "parts": parts,
    }


class _StandIn:
    """A server in a thread of its own; ``messages``: what it received. A context manager (starts, stops)."""

    def __init__(self, server: socketserver.BaseServer, received: _Received) -> None:
        self._server = server
        self._received = received
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]  # type: ignore[index]
        return str(host), int(port)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self._received.messages

    def start(self) -> _StandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for serve_forever(): only once it runs
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()

    def __enter__(self) -> _StandIn:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class _ThreadingTCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def webhook_stand_in(host: str = "127.0.0.1", port: int = 0, on_message: Record | None = None) -> _StandIn:
    """A Slack Incoming Webhook stand-in on ``host:port`` (0: any free port; ``address`` says which)."""
    received = _Received(on_message)
    server = ThreadingHTTPServer((host, port), _webhook_handler(received))
    server.daemon_threads = True
    return _StandIn(server, received)


def smtp_stand_in(host: str = "127.0.0.1", port: int = 0, on_message: Record | None = None) -> _StandIn:
    """An SMTP server stand-in on ``host:port`` (0: any free port), without TLS or login."""
    received = _Received(on_message)
    return _StandIn(_ThreadingTCPServer((host, port), _smtp_handler(received)), received)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="0.0.0.0")  # noqa: S104 - a container's own network
    parser.add_argument("--http-port", type=int, default=8025)
    parser.add_argument("--smtp-port", type=int, default=2525)
    args = parser.parse_args(argv)
    lock = threading.Lock()

    def emit(message: dict[str, Any]) -> None:
        with lock:
            print(json.dumps(message), flush=True)

    webhook_stand_in(args.host, args.http_port, emit).start()
    smtp_stand_in(args.host, args.smtp_port, emit).start()
    print(json.dumps({"ready": True, "http_port": args.http_port, "smtp_port": args.smtp_port}), flush=True)
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
