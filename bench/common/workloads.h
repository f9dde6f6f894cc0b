/* workloads.h — the benchmark workloads shared by bench_session, bench_store and bench_engine, so
 * that the three measure the same orchestrations and rules. Benchmark code only: every function
 * exits with a message when something cannot be built. */
#ifndef XGR_BENCH_WORKLOADS_H
#define XGR_BENCH_WORKLOADS_H

#include "xgr/bundle.h"
#include "xgr/value.h"

#define BENCH_OWNER "0x0000000000000000000000000000000000000001"

/* IterationOfPi: the public example's rule (waitSec 3600), one step that spawns itself; start
 * step "PiIterationStep", start payload BENCH_PI_PAYLOAD. The caller frees the bundle. */
xgr_bundle *bench_pi_loop_bundle(void);
#define BENCH_PI_PAYLOAD "{\"Iter\":0,\"S\":0.0,\"Pi\":0.0}"

/* A 32-way fan-out + `all` join: A spawns B0..B31, whose valid results close join J (waitonjoin
 * kill); every step runs the same small rule. 34 steps; start step "A", start payload
 * BENCH_FANOUT_PAYLOAD. The caller frees the bundle. */
xgr_bundle *bench_fanout_bundle(void);
#define BENCH_FANOUT_PAYLOAD "{\"N\":0}"

/* A JSON text as a value (the caller releases it); aborts on a parse error. */
xgr_value bench_json(const char *txt);

#endif
