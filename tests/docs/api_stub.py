#!/usr/bin/env python3
"""api_stub.py -- the local stand-in HTTP API of the documentation's rule examples.

GET PATH  answers the file docs/examples/api/PATH (200, the file's bytes) or 404.
POST PATH answers {"accepted": true, "path": PATH, "contentType": the request's Content-Type,
          "request": BODY} where BODY is the request body parsed as JSON (400 with {"accepted": false} when it is not JSON).

It listens on 127.0.0.1 only, on a free port, and writes that port to --port-file (or prints
it). Used by tests/docs/check_docs.py (in-process) and by hand, as docs/RULE_FORMAT.md shows:

    python3 tests/docs/api_stub.py --port-file /tmp/api.port &
    xgr step docs/examples/rule_api_get.json --payload '{"Symbol":"ETH"}' \
        --api-map https://api.example.com=http://127.0.0.1:$(cat /tmp/api.port) --allow-outbound loopback
"""
import argparse
import http.server
import json
import os
import threading

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "examples", "api")


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):  # quiet: tests compare output
        pass

    def reply(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        full = os.path.realpath(os.path.join(ROOT, path.lstrip("/")))
        if not full.startswith(os.path.realpath(ROOT) + os.sep) or not os.path.isfile(full):
            self.reply(404, b'{"error":"not found"}')
            return
        with open(full, "rb") as f:
            self.reply(200, f.read())

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError:
            self.reply(400, b'{"accepted":false}')
            return
        out = {"accepted": True, "path": self.path, "contentType": self.headers.get("Content-Type"),
               "request": body}
        self.reply(200, json.dumps(out).encode())


def start():
    """Start the stub on a thread; returns the server (server.server_port, server.shutdown())."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main():
    ap = argparse.ArgumentParser(description="the docs' stand-in HTTP API on 127.0.0.1")
    ap.add_argument("--port-file", help="write the port here once listening")
    a = ap.parse_args()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if a.port_file:
        with open(a.port_file, "w") as f:
            f.write(str(srv.server_port))
    else:
        print(srv.server_port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
