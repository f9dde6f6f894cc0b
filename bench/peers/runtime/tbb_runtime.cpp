// tbb_runtime.cpp — the runtime benchmark's two workloads written with oneTBB task_group, as a
// peer for bench/runtime/bench_runtime.c. Same command line and output format.
//
//   spawn-tree --depth D : each task runs two child tasks in a task_group and waits for them
//                          (their results are the subtree sizes); leaves return 1.
//   ping-pong --pairs P --msgs M : each message is a task; in each pair the receiver of a
//                          message runs the task that delivers the reply, M messages each way.
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

static double peak_rss_mb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

static long tree(int depth) {
  if (depth == 0) return 1;
  long a = 0, b = 0;
  tbb::task_group g;
  g.run([&] { a = tree(depth - 1); });
  g.run([&] { b = tree(depth - 1); });
  g.wait();
  return a + b + 1;
}

struct Pair {
  long msgs;
  long got_a = 0, got_b = 0; // messages received by each side (each side runs one task at a time)
};

static std::atomic<long> g_messages{0};

// Deliver message number n to side `side` (0 = pinger, 1 = ponger) of pair p.
static void deliver(tbb::task_group &g, Pair *p, int side, long n) {
  g_messages.fetch_add(1, std::memory_order_relaxed);
  if (side == 1) {
    p->got_b++;
    g.run([&g, p, n] { deliver(g, p, 0, n); }); // reply
  } else {
    p->got_a++;
    if (n < p->msgs) g.run([&g, p, n] { deliver(g, p, 1, n + 1); }); // next message
  }
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  const char *what = argv[1];
  long depth = 20, pairs = 1000, msgs = 10000;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--depth")) depth = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--pairs")) pairs = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--msgs")) msgs = atol(argv[i + 1]);
  }
  unsigned workers = std::thread::hardware_concurrency();
  auto t0 = std::chrono::steady_clock::now();
  if (!strcmp(what, "spawn-tree")) {
    long expect = (1L << (depth + 1)) - 1;
    long got = tree((int)depth);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (got != expect) { fprintf(stderr, "tbb spawn-tree: %ld != %ld\n", got, expect); return 1; }
    printf("tbb spawn-tree depth=%ld workers=%u tasks=%ld time=%.4fs rate=%.3fM tasks/s peak_rss=%.1fMB\n",
           depth, workers, expect, dt, expect / dt / 1e6, peak_rss_mb());
  } else if (!strcmp(what, "ping-pong")) {
    Pair *ps = new Pair[pairs];
    tbb::task_group g;
    for (long i = 0; i < pairs; i++) {
      ps[i].msgs = msgs;
      Pair *p = &ps[i];
      g.run([&g, p] { deliver(g, p, 1, 1); });
    }
    g.wait();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    long total = 2 * pairs * msgs;
    for (long i = 0; i < pairs; i++)
      if (ps[i].got_a != msgs || ps[i].got_b != msgs) { fprintf(stderr, "tbb ping-pong: lost messages\n"); return 1; }
    if (g_messages.load() != total) { fprintf(stderr, "tbb ping-pong: %ld != %ld\n", g_messages.load(), total); return 1; }
    printf("tbb ping-pong pairs=%ld msgs=%ld workers=%u messages=%ld time=%.4fs rate=%.3fM msgs/s peak_rss=%.1fMB\n",
           pairs, msgs, workers, total, dt, total / dt / 1e6, peak_rss_mb());
    delete[] ps;
  } else {
    return 2;
  }
  return 0;
}
