// common.mjs — what the console's browser tests (console.test.mjs, signin.test.mjs, siwe.test.mjs,
// scale.test.mjs, batch.test.mjs, batch_permit.test.mjs, migrate.test.mjs) share: the PASS/FAIL
// checks and their count, a bounded wait, a JSON-RPC call, headless chromium with one page, xgrd
// started on 127.0.0.1 in a temporary directory (removed at exit), and the end of every test: a time guard around main, then
// xgrd must stop cleanly (under ASan: no leak, no error report) within 30 s of SIGTERM, and the exit
// status says whether anything failed.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, rmSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

let failures = 0;
export const ok = (cond, name, detail) => {
  if (cond) console.log(`PASS ${name}`);
  else { failures++; console.log(`FAIL ${name}${detail !== undefined ? ': ' + JSON.stringify(detail).slice(0, 500) : ''}`); }
};
export const sleep = ms => new Promise(r => setTimeout(r, ms));

// fn's first truthy answer, polled every 50 ms for at most ms (a throw counts as not yet)
export async function until(what, fn, ms = 10000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e.message; }
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
}

// xgrd on 127.0.0.1 (a free port, --log-level warn) with args(tmp) added, in a fresh temporary
// directory tmp named after prefix: { daemon, tmp, url() }, url() waiting (10 s) for the port file.
// opts.log: write xgrd's stderr (with every request's line, --log-level info) to tmp/xgrd.log.
export function startXgrd(XGRD, prefix, args, opts = {}) {
  const tmp = mkdtempSync(path.join(tmpdir(), prefix));
  const err = opts.log ? openSync(`${tmp}/xgrd.log`, 'w') : 'inherit';
  const daemon = spawn(XGRD, ['--listen', '127.0.0.1:0', ...args(tmp), '--port-file', `${tmp}/port`, '--log-level',
    opts.log ? 'info' : 'warn'], { stdio: ['ignore', 'inherit', err] });
  process.on('exit', () => { try { daemon.kill('SIGTERM'); } catch (e) { /* gone */ } rmSync(tmp, { recursive: true, force: true }); });
  const port = () => existsSync(`${tmp}/port`) && readFileSync(`${tmp}/port`, 'utf8').trim();
  const url = async () => `http://127.0.0.1:${await until('xgrd port file', port)}`;
  return { daemon, tmp, url };
}

// A JSON-RPC call to xgrd at u (no permit: --auth none): its result, or a throw with the error's message.
export async function rpc(u, method, params) {
  const r = await fetch(u, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const b = await r.json();
  if (b.error) throw new Error(`${method}: ${b.error.message}`);
  return b.result;
}

// Register for owner, through call(method, params), the rules rwait (waits an hour, then goes on)
// and rend, and orchestration `hold` with structure (default: main, then end an hour later).
export async function putHold(call, owner, structure = { main: { rule: 'rwait', onValid: { spawns: ['end'] } }, end: { rule: 'rend' } }) {
  for (const [address, rule] of [['rwait', { payload: {}, rules: [], onValid: { waitSec: 3600 }, onInvalid: {} }],
    ['rend', { payload: {}, rules: [], onValid: {}, onInvalid: {} }]])
    await call('xgr_putRule', [{ from: owner, address, rule }]);
  return call('xgr.putOrchestration', { from: owner, xrc729: 'hold', orchestration: { id: 'hold', structure } });
}

// Headless Debian chromium (puppeteer-core) and one page of width × height that collects its
// uncaught errors, and with consoleErrors its console's errors too: { browser, page, pageErrors }.
export async function openPage(CHROMIUM, { width = 1440, height = 1000, consoleErrors = false } = {}) {
  const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-extensions'] });
  const page = await browser.newPage();
  await page.setViewport({ width, height });
  const pageErrors = [];
  page.on('pageerror', e => pageErrors.push(e.message));
  if (consoleErrors) page.on('console', m => { if (m.type() === 'error') pageErrors.push(m.text()); });
  return { browser, page, pageErrors };
}

// Run main within seconds, then after() (closing the browser), then stop xgrd and exit with the
// verdict (note is added to the last line).
export async function run(main, { daemon, seconds, after = async () => {}, note = '' }) {
  const guard = setTimeout(() => { console.log(`FAIL the test took longer than ${seconds} s`); process.exit(1); }, seconds * 1000);
  try {
    await main();
  } catch (e) {
    failures++;
    console.log('FAIL ' + (e.stack || e.message));
  } finally {
    clearTimeout(guard);
    await after();
  }
  const code = await new Promise(res => {
    if (daemon.exitCode !== null) return res(daemon.exitCode);
    const t = setTimeout(() => res('timeout'), 30000);
    daemon.once('exit', (c, sig) => { clearTimeout(t); res(c === null ? sig : c); });
    daemon.kill('SIGTERM');
  });
  if (code !== 0) { failures++; console.log(`FAIL xgrd exited with ${code} after SIGTERM`); } else console.log('PASS xgrd stopped cleanly');
  console.log(failures ? `${failures} failure(s)${note}` : `all passed${note}`);
  process.exit(failures ? 1 : 0);
}
