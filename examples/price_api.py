#!/usr/bin/env python3
"""price_api.py — a stand-in price API for the examples, on 127.0.0.1 only.

The price-feed and quorum bundles of examples/bundles/ call three made-up price sources at
https://alpha.prices.example, https://beta.prices.example and https://gamma.prices.example (the
.example domain never resolves). This server answers for all three under one port, each under its
own path prefix, so that `--api-map` can point a bundle at it:

    xgr run examples/bundles/price_feed.json --start Poll \\
        --api-map https://alpha.prices.example=http://127.0.0.1:PORT/alpha ... --allow-outbound loopback

Routes (each source has its own response shape, as real APIs do):
    GET /alpha/v1/ticker/<BASE>-<QUOTE>   {"pair": "BTC-USD", "last": "65040.00", "n": 1}
    GET /beta/quote?base=BTC&quote=USD    {"quote": {"base": "BTC", "quote": "USD", "price": 65055.0}}
    GET /gamma/rates                      {"rates": {"BTC": {"USD": 65020.0}}}
    GET /health                           {"ok": true}
Anything else is 404.

Prices are deterministic: every source counts its own requests (n = 1, 2, ...) and answers a slow
upward drift from 65000 (40 per request; beta 15 above it, gamma 20 below), so a run prints the
same numbers every time. Two planned disturbances show what the rules are for:
  - alpha's 3rd answer is a spike 25% above the drift (the price feed's jump guard rejects it);
  - beta's 1st request fails with 503 (the quorum's beta step retries; two other sources answer).
--down SOURCE makes a source answer 503 on every request (repeatable), --spike PCT moves gamma's
prices by PCT percent (a source that disagrees with the others).

usage: price_api.py PORT_FILE [--port N] [--down alpha|beta|gamma]... [--spike PCT] [--verbose]
Listens on 127.0.0.1 (by default on a free port the kernel picks), writes the port to PORT_FILE
once it is listening, and serves until SIGTERM or SIGINT. --verbose logs one line per request to
stderr.
"""
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

BASE_PRICE = 65000.0
DRIFT = 40.0


class Sources:
    """Request counters and the price each source answers for its n-th request."""

    def __init__(self, down, gamma_pct):
        self.lock = threading.Lock()
        self.count = {"alpha": 0, "beta": 0, "gamma": 0}
        self.down = set(down)
        self.gamma_factor = 1.0 + gamma_pct / 100.0

    def next(self, source):
        """The price for this source's next request, or None when the source is down."""
        with self.lock:
            self.count[source] += 1
            n = self.count[source]
        if source in self.down or (source == "beta" and n == 1):
            return None, n
        price = BASE_PRICE + DRIFT * n
        if source == "alpha" and n == 3:
            price *= 1.25
        elif source == "beta":
            price += 15.0
        elif source == "gamma":
            price = (price - 20.0) * self.gamma_factor
        return round(price, 2), n


class Handler(BaseHTTPRequestHandler):
    server_version = "price-api/1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("price_api: " + (fmt % args) + "\n")

    def answer(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        query = parse_qs(url.query)
        src = self.server.sources
        if parts == ["health"]:
            return self.answer(200, {"ok": True})
        if len(parts) == 4 and parts[:3] == ["alpha", "v1", "ticker"] and "-" in parts[3]:
            price, n = src.next("alpha")
            if price is None:
                return self.answer(503, {"error": "alpha is down"})
            return self.answer(200, {"pair": parts[3], "last": "%.2f" % price, "n": n})
        if parts == ["beta", "quote"]:
            base, quote = query.get("base", ["BTC"])[0], query.get("quote", ["USD"])[0]
            price, _ = src.next("beta")
            if price is None:
                return self.answer(503, {"error": "beta is down"})
            return self.answer(200, {"quote": {"base": base, "quote": quote, "price": price}})
        if parts == ["gamma", "rates"]:
            price, _ = src.next("gamma")
            if price is None:
                return self.answer(503, {"error": "gamma is down"})
            return self.answer(200, {"rates": {"BTC": {"USD": price}}})
        return self.answer(404, {"error": "no such route: " + url.path})


def main(argv):
    args = argv[1:]
    if not args or args[0].startswith("-"):
        sys.stderr.write("usage: price_api.py PORT_FILE [--port N] [--down alpha|beta|gamma]... [--spike PCT] [--verbose]\n")
        return 2
    port_file, port, down, spike, verbose = args[0], 0, [], 0.0, False
    i = 1
    while i < len(args):
        if args[i] == "--port" and i + 1 < len(args):
            port = int(args[i + 1])
            i += 2
        elif args[i] == "--down" and i + 1 < len(args) and args[i + 1] in ("alpha", "beta", "gamma"):
            down.append(args[i + 1])
            i += 2
        elif args[i] == "--spike" and i + 1 < len(args):
            spike = float(args[i + 1])
            i += 2
        elif args[i] == "--verbose":
            verbose = True
            i += 1
        else:
            sys.stderr.write("price_api.py: unknown argument %r\n" % args[i])
            return 2
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    httpd.sources = Sources(down, spike)
    httpd.verbose = verbose
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown).start())
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % httpd.server_address[1])
    os.replace(port_file + ".tmp", port_file)   # readers never see a half-written file
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
