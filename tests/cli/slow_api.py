#!/usr/bin/env python3
"""slow_api.py PORTFILE — a stand-in HTTP API on 127.0.0.1 (port 0, written to PORTFILE) for
cli_checked.sh and outbound.sh: every GET answers {"n":1} after 0.4 s and counts how many requests
were in flight at once; GET /peak answers {"peak": N, "total": M}, the most that ever were and how
many there were; GET /reset sets both to 0. xgrd's --max-running and --max-outbound show there."""
import http.server
import json
import os
import sys
import threading
import time

lock = threading.Lock()
cur = 0
peak = 0
total = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        global cur, peak, total
        if self.path == '/peak':
            with lock:
                body = json.dumps({'peak': peak, 'total': total}).encode()
        elif self.path == '/reset':
            with lock:
                peak = total = 0
            body = b'{}'
        else:
            with lock:
                cur += 1
                total += 1
                peak = max(peak, cur)
            time.sleep(0.4)
            with lock:
                cur -= 1
            body = b'{"n":1}'
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
with open(sys.argv[1] + '.tmp', 'w') as f:
    f.write(str(server.server_address[1]))
os.rename(sys.argv[1] + '.tmp', sys.argv[1])
server.serve_forever()
