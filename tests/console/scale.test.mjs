// scale.test.mjs XGR XGRD OUTDIR CHROMIUM — the console at scale, against a real xgrd on 127.0.0.1.
//
// Fills a SQLite store with N sessions of one owner (XGR_CONSOLE_SESSIONS, default 100,000; JSON-RPC
// batches of xgr.enqueue) and one session that runs 10,000 processes (a step that spawns itself),
// then checks what bounds the cost of the answers, by counting rather than by the clock (the machine
// is shared; the times are printed for the reader, and bench/ measures speed): xgr.console.sessions
// examines only the rows it answers on the first page and on a page deep in the list (a keyset
// cursor, not an offset), a filter that matches nothing stops at its budget of 20,000 rows (or
// 40 ms) and answers a cursor to go on from; the session view of the 10,000-process session answers
// one count per step and paged lists, a few kilobytes rather than every process; and the pages show
// both in headless chromium (the graph has one node per step).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ok, sleep, startXgrd, run, openPage } from './common.mjs';

const [XGR, XGRD, OUT, CHROMIUM] = process.argv.slice(2);
const N = Number(process.env.XGR_CONSOLE_SESSIONS || 100000);
const OWNER = '0x00000000000000000000000000000000000000e1';
const LOOPER = '0x00000000000000000000000000000000000000e2';
const { daemon, tmp, url } = startXgrd(XGRD, 'xgr-console-scale-', dir => ['--auth', 'none', '--store', `sqlite:${dir}/store.db`,
  '--sync', 'normal']);

async function post(url, body) {
  const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return r.json();
}
async function timed(url, method, params) {
  const t0 = performance.now();
  const b = await post(url, { jsonrpc: '2.0', id: 1, method, params });
  const ms = performance.now() - t0;
  if (b.error) throw new Error(`${method}: ${b.error.message}`);
  return { ms, r: b.result };
}
async function main() {
  const URL = await url();
  writeFileSync(`${tmp}/one.json`, JSON.stringify({ orchestration: { id: 'one', structure: { S: { rule: 'S' } } },
    rules: { S: { payload: { x: { type: 'int64', default: 1 } }, rules: ['[x] > 0'], onValid: { payload: { y: '[x] * 2' } }, onInvalid: {} } } }));
  writeFileSync(`${tmp}/loop.json`, JSON.stringify({ orchestration: { id: 'loop', structure: { L: { rule: 'L', onValid: { spawns: ['L'] } } } },
    rules: { L: { payload: { n: { type: 'int64', default: 0 }, max: { type: 'int64', default: 9999 } }, rules: ['[n] < [max]'],
      onValid: { payload: { n: '[n] + 1' } }, onInvalid: {} } } }));
  execFileSync(XGR, ['deploy', `${tmp}/one.json`, '--registry', 'one', '--url', URL]);
  execFileSync(XGR, ['deploy', `${tmp}/loop.json`, '--registry', 'loop', '--url', URL]);
  const t0 = Date.now();
  for (let b = 0; b < N; b += 200) {
    const batch = [];
    for (let i = b; i < Math.min(N, b + 200); i++)
      batch.push({ jsonrpc: '2.0', id: i, method: 'xgr.enqueue', params: { owner: OWNER, rootPid: i + 1, xrc729: 'one', init: { stepId: 'S' } } });
    const r = await post(URL, batch);
    if (r.some(x => x.error)) throw new Error('enqueue: ' + JSON.stringify(r.find(x => x.error)));
  }
  console.log(`# ${N} sessions enqueued in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  await post(URL, { jsonrpc: '2.0', id: 1, method: 'xgr.enqueue', params: { owner: LOOPER, rootPid: 1, xrc729: 'loop', init: { stepId: 'L' } } });
  const lend = Date.now() + 120000;
  for (;;) {
    const { r } = await timed(URL, 'xgr.console.session', { owner: LOOPER, rootPid: '1', procLimit: 1, histLimit: 1 });
    if (r.session.status !== 'running') break;
    if (Date.now() > lend) throw new Error('the 10,000-process session did not finish');
    await sleep(200);
  }

  const SCAN_MAX = 20000;
  let t = await timed(URL, 'xgr.console.sessions', { owner: OWNER, limit: 50 });
  console.log(`# first page: ${t.r.scanned} rows examined, ${t.ms.toFixed(1)} ms`);
  ok(t.r.items.length === 50 && t.r.items[0].rootPid === String(N) && t.r.scanned === 50,
     `first page of ${N} sessions: 50 rows examined`, t.r.scanned);
  t = await timed(URL, 'xgr.console.sessions', { owner: OWNER, limit: 200, beforeRootPid: Math.floor(N / 2) });
  console.log(`# a page in the middle: ${t.r.scanned} rows examined, ${t.ms.toFixed(1)} ms`);
  ok(t.r.items.length === 200 && t.r.items[0].rootPid === String(Math.floor(N / 2) - 1) && t.r.scanned === 200,
     'a page in the middle: 200 rows examined (a cursor, not an offset)', t.r.scanned);
  t = await timed(URL, 'xgr.console.sessions', { owner: OWNER, registry: 'no-such-registry' });
  console.log(`# a filter matching nothing: ${t.r.scanned} rows examined, ${t.ms.toFixed(1)} ms`);
  ok(t.r.items.length === 0 && t.r.scanned >= 1 && t.r.scanned <= SCAN_MAX &&
     (t.r.scanned >= N || t.r.nextBeforeRootPid === String(N + 1 - t.r.scanned)),
     `a filter that matches nothing: at most ${SCAN_MAX} rows examined, a cursor to the next one`,
     { scanned: t.r.scanned, next: t.r.nextBeforeRootPid });
  t = await timed(URL, 'xgr.console.session', { owner: LOOPER, rootPid: '1', procLimit: 50, histLimit: 50 });
  const bytes = JSON.stringify(t.r).length;
  console.log(`# the 10,000-process session view: ${bytes} bytes, ${t.ms.toFixed(1)} ms`);
  ok(t.r.processes.total === 10000 && t.r.processes.items.length === 50 && t.r.steps.L.done === 10000 &&
     t.r.history.total === 10000 && t.r.history.items.length <= 50 && bytes < 64 * 1024,
     '10,000 processes: one count per step, paged lists, an answer under 64 KB', { bytes, steps: t.r.steps });

  const { browser, page } = await openPage(CHROMIUM);
  try {
    await page.goto(`${URL}/ui/#/sessions?owner=${OWNER}`);
    await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 50, { timeout: 20000 });
    await page.click('#older');
    await page.waitForFunction(n => { const td = document.querySelector('#sessions tbody tr td'); return td && td.textContent === String(n - 50); },
      { timeout: 20000 }, N);
    ok(true, 'the list pages through the sessions');
    await page.screenshot({ path: path.join(OUT, 'scale-sessions.png') });
    await page.goto(`${URL}/ui/#/session/${LOOPER}/1`);
    await page.waitForSelector('#graph svg #step-L.st-done', { timeout: 20000 });
    ok((await page.$$('#graph svg g.node')).length === 1, 'the 10,000-process graph has one node per step');
    const pager = await page.$eval('#procs .pager', e => e.textContent);
    ok(pager.includes('1–50 of 10000'), 'processes are paged', pager);
    await page.screenshot({ path: path.join(OUT, 'scale-10000-processes.png') });
  } finally {
    await browser.close();
  }
}

await run(main, { daemon, seconds: 500 });
