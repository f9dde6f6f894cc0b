#!/usr/bin/env python3
"""enqueue.py URL BODIES THREADS — bench/scale: send every line of BODIES (an xgr.enqueue request
each) once, THREADS threads over keep-alive connections; prints the count, the errors and the
enqueues per second. The client is Python: on the 2-core machine it shares the CPU with xgrd, so
the figure is a lower bound of what xgrd takes."""
import http.client
import sys
import threading
import time
import urllib.parse

url, path, nthreads = sys.argv[1], sys.argv[2], int(sys.argv[3])
u = urllib.parse.urlparse(url)
lines = open(path, "rb").read().splitlines()
errors = [0] * nthreads


def work(t):
    c = http.client.HTTPConnection(u.hostname, u.port)
    for i in range(t, len(lines), nthreads):
        c.request("POST", "/", lines[i], {"Content-Type": "application/json"})
        body = c.getresponse().read()
        if b'"queued"' not in body:
            errors[t] += 1


t0 = time.perf_counter()
ths = [threading.Thread(target=work, args=(t,)) for t in range(nthreads)]
for th in ths:
    th.start()
for th in ths:
    th.join()
dt = time.perf_counter() - t0
print("enqueued: %d sessions in %.1f s = %.0f enqueues/s (%d not queued; %d client threads)" %
      (len(lines), dt, len(lines) / dt, sum(errors), nthreads))
