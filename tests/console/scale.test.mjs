// scale.test.mjs XGR XGRD OUTDIR CHROMIUM — the console at scale, against a real xgrd on 127.0.0.1.
//
// Fills a SQLite store with N sessions of one owner (XGR_CONSOLE_SESSIONS, default 100,000; JSON-RPC
// batches of xgr.enqueue) and one session that runs 10,000 processes (a step that spawns itself),
// then checks that xgr.console.sessions answers in under 100 ms (first page, a page deep in the
// list, and a filter that matches nothing, which scans its budget of 20,000 rows or 40 ms), that the session
// view of the 10,000-process session answers in under 100 ms with one count per step and a paged
// process list, and that the pages show both in headless chromium (the graph has one node per step).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { ok, sleep, startXgrd, run } from './common.mjs';

const [XGR, XGRD, OUT, CHROMIUM] = process.argv.slice(2);
const N = Number(process.env.XGR_CONSOLE_SESSIONS || 100000);
const BUDGET = 100 * Number(process.env.XGR_TIME_FACTOR || 1);   // ms; sanitizer builds get more
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
/* the best of 5 calls, or of up to 20 while none was within the budget (the machine is shared: on
 * a loaded one five calls in a row can all be starved; a slow algorithm is slow every time) */
async function best(url, method, params) {
  let min = Infinity, r;
  for (let i = 0; i < 20 && (i < 5 || min >= BUDGET); i++) {
    const t = await timed(url, method, params); r = t.r; min = Math.min(min, t.ms);
  }
  return { ms: min, r };
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

  let t = await best(URL, 'xgr.console.sessions', { owner: OWNER, limit: 50 });
  console.log(`# first page: ${t.ms.toFixed(1)} ms`);
  ok(t.ms < BUDGET && t.r.items.length === 50 && t.r.items[0].rootPid === String(N), `first page of ${N} sessions in < ${BUDGET} ms`, t.ms);
  t = await best(URL, 'xgr.console.sessions', { owner: OWNER, limit: 200, beforeRootPid: Math.floor(N / 2) });
  console.log(`# a page in the middle: ${t.ms.toFixed(1)} ms`);
  ok(t.ms < BUDGET && t.r.items.length === 200 && t.r.items[0].rootPid === String(Math.floor(N / 2) - 1), `a page in the middle in < ${BUDGET} ms`, t.ms);
  t = await best(URL, 'xgr.console.sessions', { owner: OWNER, registry: 'no-such-registry' });
  console.log(`# a filter matching nothing (${t.r.scanned} rows scanned): ${t.ms.toFixed(1)} ms`);
  ok(t.ms < BUDGET && t.r.items.length === 0 && (N <= 20000 || t.r.nextBeforeRootPid), `a filter that matches nothing: bounded scan in < ${BUDGET} ms, with a cursor`, t.ms);
  t = await best(URL, 'xgr.console.session', { owner: LOOPER, rootPid: '1', procLimit: 50, histLimit: 50 });
  console.log(`# the 10,000-process session view: ${t.ms.toFixed(1)} ms, ${JSON.stringify(t.r).length} bytes`);
  ok(t.ms < BUDGET && t.r.processes.total === 10000 && t.r.processes.items.length === 50 && t.r.steps.L.done === 10000 &&
     t.r.history.total === 10000, `10,000 processes: one count per step, paged lists, < ${BUDGET} ms`, { ms: t.ms, steps: t.r.steps });

  const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'] });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1440, height: 1000 });
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
