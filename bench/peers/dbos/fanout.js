// fanout.js — the peer of `bench_store --file postgresql://...`: xgr's fan-out workload (a start
// step A, a 32-way fan-out B0..B31, an `all` join J: 34 steps per session) as a DBOS Transact
// durable workflow (npm @dbos-inc/dbos-sdk, pinned by package-lock.json), every step a DBOS step
// whose output DBOS checkpoints in its PostgreSQL system database before the step returns. Each
// step runs the same small rule as xgr's (`N >= 0`, then N + 1); the join step gets all 32
// results. L workflows are in flight at once (a finished one is replaced by a new one, as
// bench_store keeps L live sessions) until M have finished or the time limit has passed; the rate
// counts the steps made durable until then (no new workflow starts after it; those in flight get a
// grace period to finish, outside the measurement). A step counts as durable when its checkpoint
// committed, i.e. when DBOS.runStep returned; at the end the counts are checked against the
// system database itself (rows in operation_outputs, workflows in SUCCESS).
//
// usage: node fanout.js URL [--sessions M] [--live L] [--seconds T] [--pool P] [--grace G]
//   URL   the system database, a postgresql:// URL (a unix socket: ...?host=/socket/dir); DBOS
//         creates the database and its schema on launch
//   M     workflows to run (default 2000), L in flight (default 256), T seconds at most (default
//         60), P connections in DBOS's pool (default 10, DBOS's own default); workflows in flight
//         at the time limit get G more seconds (default 30) to finish before the database check
'use strict';
const { DBOS } = require('@dbos-inc/dbos-sdk');
const { Client } = require('pg');

function usage(msg) {
  console.error(`fanout.js: ${msg}\nusage: node fanout.js URL [--sessions M] [--live L] [--seconds T] [--pool P] [--grace G]`);
  process.exit(2);
}

const url = process.argv[2];
if (!url || !url.startsWith('postgresql://')) usage('the first argument must be a postgresql:// URL');
const opt = { sessions: 2000, live: 256, seconds: 60, pool: 10, grace: 30 };
for (let i = 3; i < process.argv.length; i += 2) {
  const k = process.argv[i].replace(/^--/, ''), v = Number(process.argv[i + 1]);
  if (!(k in opt)) usage(`unknown option ${process.argv[i]}`);
  if (!Number.isInteger(v) || v <= 0 || v > 1e7) usage(`${process.argv[i]} must be an integer in 1..10000000, got ${process.argv[i + 1]}`);
  opt[k] = v;
}

const WIDTH = 32;
let durableSteps = 0;

// The rule of every step of xgr's fan-out bundle (bench/common/workloads.c): validate, then N + 1.
async function rule(payload) {
  if (!(Number.isInteger(payload.N) && payload.N >= 0)) throw new Error(`rule: [N] >= 0 failed for ${JSON.stringify(payload)}`);
  return { N: payload.N + 1 };
}

async function step(name, payload) {
  const out = await DBOS.runStep(() => rule(payload), { name });
  durableSteps++;
  return out;
}

async function fanoutFn(input) {
  const a = await step('A', input);
  const bs = await Promise.all(Array.from({ length: WIDTH }, (_, i) => step(`B${i}`, a)));
  // the join sees every branch's result, as J's `all` join does
  const n = bs.reduce((m, b) => Math.max(m, b.N), 0);
  return step('J', { N: n });
}
const fanout = DBOS.registerWorkflow(fanoutFn, { name: 'fanout32' });

async function main() {
  DBOS.setConfig({ name: 'xgr-bench-fanout', systemDatabaseUrl: url, systemDatabasePoolSize: opt.pool, logLevel: 'error' });
  await DBOS.launch();
  let started = 0, finished = 0;
  const live = Math.min(opt.live, opt.sessions);
  const t0 = process.hrtime.bigint();
  const elapsed = () => Number(process.hrtime.bigint() - t0) / 1e9;
  async function lane() {
    while (started < opt.sessions && elapsed() < opt.seconds) {
      started++;
      const r = await fanout({ N: 0 });
      if (r.N !== 3) throw new Error(`workflow result ${JSON.stringify(r)}, expected {"N":3}`);
      finished++;
    }
  }
  const sleep = (ms) => new Promise((res) => { const t = setTimeout(res, ms); t.unref(); });
  const lanes = Promise.all(Array.from({ length: live }, lane));
  // The measurement ends when every workflow finished or at the time limit, whichever is first;
  // workflows still in flight at the limit get a grace period to finish (not counted in the rate),
  // so the database check below can be exact.
  await Promise.race([lanes, sleep(opt.seconds * 1000)]);
  const dt = elapsed(), steps = durableSteps, wfDone = finished;
  let drained = await Promise.race([lanes.then(() => true), sleep(opt.grace * 1000).then(() => false)]);
  await DBOS.shutdown();

  // the database's own count of what was made durable
  const c = new Client({ connectionString: url });
  await c.connect();
  const ops = await c.query('SELECT count(*)::bigint AS n FROM dbos.operation_outputs');
  const wfs = await c.query("SELECT count(*)::bigint AS n FROM dbos.workflow_status WHERE status = 'SUCCESS'");
  // commits in this database (server statistics: DBOS's backends flushed theirs when they exited)
  const tx = await c.query('SELECT xact_commit::bigint AS n FROM pg_stat_database WHERE datname = current_database()');
  const ver = await c.query('SHOW server_version');
  const fs = await c.query('SHOW fsync');
  const sc = await c.query('SHOW synchronous_commit');
  await c.end();
  const rows = Number(ops.rows[0].n), done = Number(wfs.rows[0].n);
  const sdk = JSON.parse(require('fs').readFileSync(require('path').join(__dirname, 'node_modules/@dbos-inc/dbos-sdk/package.json'), 'utf8')).version;
  console.log(`dbos fanout (DBOS Transact ${sdk}, PostgreSQL ${ver.rows[0].server_version.split(' ')[0]}, fsync=${fs.rows[0].fsync}, ` +
              `synchronous_commit=${sc.rows[0].synchronous_commit}): ${wfDone} workflows of a ${WIDTH}-way fan-out + join ` +
              `(live ${live}, pool ${opt.pool}), ${steps} durable steps in ${dt.toFixed(2)} s = ` +
              `${Math.round(steps / dt)} durable steps/s; database: ${rows} step checkpoints, ${done} workflows SUCCESS ` +
              `(${durableSteps} steps, ${finished} workflows after ${drained ? 'the in-flight ones finished' : `a ${opt.grace} s grace, ${started - finished} still running`}); ` +
              `${tx.rows[0].n} transactions committed in the database in all (${(Number(tx.rows[0].n) / rows).toFixed(2)} per step checkpoint, reads included)`);
  const ok = drained ? rows === durableSteps && done === finished && durableSteps === finished * (WIDTH + 2)
                     : rows >= durableSteps && done >= finished;
  if (!ok) {
    console.error(`fanout.js: counts disagree: ${durableSteps} steps run, ${rows} checkpointed; ${finished} workflows, ${done} in SUCCESS`);
    process.exit(1);
  }
  process.exit(0);
}

main().catch((e) => {
  console.error(`fanout.js: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
