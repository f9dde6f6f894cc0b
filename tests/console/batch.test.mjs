// batch.test.mjs XGR XGRD OUTDIR CHROMIUM — the console's batch page in a real browser (issue 35).
//
// Starts xgrd (--auth none, SQLite store in a temporary directory, --batch-rate 4 so the progress
// can be watched) on 127.0.0.1, registers a bundle whose sessions wait an hour, starts eight of
// them, then drives headless chromium through #/batch: the filters select sessions 3..8 (a rootPid
// range), Preview shows the count (6) and a sample, the confirm button starts a pause, the page
// shows the operation's progress bar until it is done, and xgrd says exactly those six are paused
// (one audit entry each naming the operation) and 1..2 are not. A second operation is cancelled
// from the page. Screenshots go to OUTDIR. Every wait is bounded; nothing asserts a duration.
import path from 'node:path';
import { ok, until, startXgrd, run, rpc, openPage, putHold } from './common.mjs';

const [, XGRD, OUT, CHROMIUM] = process.argv.slice(2);
const OWNER = '0x00000000000000000000000000000000000000d2';
const { daemon, url } = startXgrd(XGRD, 'xgr-console-batch-', dir => ['--auth', 'none', '--store', `sqlite:${dir}/store.db`,
  '--batch-rate', '4']);
let browser;

async function main() {
  const URL = await url();
  await until('xgrd ready', async () => (await fetch(URL + '/readyz')).ok);
  const call = (m, p) => rpc(URL, m, p);
  await putHold(call, OWNER);
  for (let r = 1; r <= 8; r++)
    await call('xgr.enqueue', { owner: OWNER, xrc729: 'hold', rootPid: String(r), init: { stepId: 'main' } });
  await until('eight sessions wait', async () => (await call('xgr.batchPreview', { selection: { owner: OWNER, status: 'waiting' } })).count === 8);

  const { browser: b, page, pageErrors } = await openPage(CHROMIUM, { consoleErrors: true });
  browser = b;
  const shot = name => page.screenshot({ path: path.join(OUT, name), fullPage: true });
  await page.goto(`${URL}/ui/#/batch`);
  await page.waitForSelector('#bfilters');
  ok(await page.$eval('nav a[data-nav="batch"]', a => a.classList.contains('active')), 'the Batch tab is active');
  // ---- select 3..8, preview the count
  const set = async (name, v) => page.$eval(`#bfilters [name="${name}"]`, (e, val) => { e.value = val; }, v);
  await set('owner', OWNER);
  await set('rootFrom', '3');
  await set('rootTo', '8');
  await set('action', 'pause');
  await page.click('#bpreview');
  await page.waitForSelector('#bcount');
  ok(await page.$eval('#bcount', e => e.textContent) === '6', 'Preview counts the six selected sessions');
  const sample = await page.$$eval('#bresult .sample li', lis => lis.map(l => l.textContent.trim()));
  ok(sample.length === 6 && sample[0].includes(`${OWNER}/8`), 'the sample lists them, rootPid 8 first', sample);
  ok((await page.$eval('#bconfirm', b => b.textContent)).includes('pause 6'), 'the confirm button names the action and count');
  await shot('batch-preview.png');
  // ---- confirm, watch the progress until done
  await page.click('#bconfirm');
  await page.waitForSelector('#bprog', { timeout: 10000 });
  ok(/^#\/batch\/[0-9a-f]{32}$/.test(await page.evaluate(() => location.hash)), 'the page follows the started operation');
  await page.waitForFunction(() => document.querySelector('#bop') && document.querySelector('#bop').dataset.state === 'done',
    { timeout: 20000 });
  const prog = await page.$eval('#bprog', p => [p.value, p.max]);
  ok(prog[0] === 6 && prog[1] === 6, 'the progress bar ends full (6 of 6)', prog);
  ok((await page.$eval('#bprog-text', e => e.textContent)).trim() === '6 / 6', 'the progress text says 6 / 6');
  await shot('batch-done.png');
  const id = (await page.evaluate(() => location.hash)).split('/').pop();
  const paused = (await call('xgr.batchPreview', { selection: { owner: OWNER, status: 'paused' } })).count;
  ok(paused === 6, 'xgrd: the six selected sessions are paused', paused);
  for (const r of [1, 2]) {
    const s = await call('xgr.getSession', { owner: OWNER, rootPid: String(r) });
    ok(!s.audit.length, `session ${r} outside the selection was not touched`);
  }
  const s8 = await call('xgr.getSession', { owner: OWNER, rootPid: '8' });
  ok(s8.audit.length === 1 && s8.audit[0].kind === 'pause' && s8.audit[0].detail.batch === id,
    'session 8 has one pause entry naming the operation', s8.audit);
  await page.waitForFunction(i => document.querySelector('#bops') && document.querySelector('#bops').textContent.includes(i.slice(0, 12)),
    { timeout: 5000 }, id);
  ok(true, 'the operations list shows it');
  // ---- a second operation (resume at 4/s), cancelled from the page
  await page.goto(`${URL}/ui/#/batch`);
  await page.waitForSelector('#bfilters');
  await set('owner', OWNER);
  await set('status', 'paused');
  await set('action', 'resume');
  await page.click('#bpreview');
  await page.waitForSelector('#bconfirm');
  await page.click('#bconfirm');
  await page.waitForSelector('#bcancel', { timeout: 10000 });
  await page.click('#bcancel');
  await page.waitForFunction(() => document.querySelector('#bop') && document.querySelector('#bop').dataset.state === 'cancelled',
    { timeout: 10000 });
  ok(true, 'Cancel stops the operation (state cancelled)');
  const id2 = (await page.evaluate(() => location.hash)).split('/').pop();
  const op2 = await until('the cancelled operation settles', async () => {
    const a = await call('xgr.batchGet', { from: OWNER, id: id2 });
    await new Promise(r => setTimeout(r, 1200));
    const b = await call('xgr.batchGet', { from: OWNER, id: id2 });
    return a.done === b.done && b;
  });
  const still = (await call('xgr.batchPreview', { selection: { owner: OWNER, status: 'paused' } })).count;
  ok(op2.state === 'cancelled' && still === 6 - op2.done, `what it resumed (${op2.done}) is what it counts; ${still} stay paused`);
  await shot('batch-cancelled.png');
  ok(pageErrors.length === 0, 'no errors in the page', pageErrors);
}

run(main, { daemon, seconds: 200, after: async () => { if (browser) await browser.close(); } });
