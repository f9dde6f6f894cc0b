// batch_permit.test.mjs XGR XGRD OUTDIR CHROMIUM — the console's batch page in permit mode (issue 35).
//
// xgrd runs with --auth permits. The setup (a bundle, four waiting sessions) is signed by the CLI
// with a key file (--key); the browser signs in with the one-time link `xgr console --key` prints
// for the same key (Sign-In with Ethereum; docs/CONSOLE.md, "Signing in"). On #/batch the page
// previews the owner's sessions, confirms a pause and follows it to the end. Checked: every batch
// call went to the console's /ui/rpc with the CSRF token and no permit (the sign-in's cookie names
// the caller); xgrd acted as that owner (four sessions paused, one audit entry each with the owner
// as actor and the operation named).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Wallet } from 'ethers';
import { ok, until, startXgrd, run, openPage } from './common.mjs';

const [XGR, XGRD, OUT, CHROMIUM] = process.argv.slice(2);
const wallet = new Wallet('0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318');
const OWNER = wallet.address.toLowerCase();
const { daemon, tmp, url } = startXgrd(XGRD, 'xgr-console-batch-permit-', () => ['--auth', 'permits', '--chain-id', '1887']);
writeFileSync(`${tmp}/wallet.key`, wallet.privateKey + '\n', { mode: 0o600 });
writeFileSync(`${tmp}/hold.json`, JSON.stringify({
  orchestration: { id: 'hold', structure: { main: { rule: 'rwait', onValid: { spawns: ['end'] } }, end: { rule: 'rend' } } },
  rules: { rwait: { payload: {}, rules: [], onValid: { waitSec: 3600 }, onInvalid: {} },
    rend: { payload: {}, rules: [], onValid: {}, onInvalid: {} } } }));
const sent = [];   // {method, params, url, headers} of the page's JSON-RPC calls
let browser;

async function main() {
  const URL = await url();
  await until('xgrd ready', async () => (await fetch(URL + '/readyz')).ok);
  const x = (...a) => execFileSync(XGR, [...a, '--url', URL, '--key', `${tmp}/wallet.key`], { encoding: 'utf8' });
  x('deploy', `${tmp}/hold.json`, '--registry', 'hold');
  for (let r = 1; r <= 4; r++) x('enqueue', '--owner', OWNER, '--root', String(r), '--registry', 'hold', '--step', 'main');
  const waiting = () => JSON.parse(x('batch', 'preview', '--owner', OWNER, '--status', 'waiting', '--json')).count;
  await until('four sessions wait', () => waiting() === 4);

  const { browser: b, page, pageErrors: errors } = await openPage(CHROMIUM);
  browser = b;
  page.on('request', req => {
    if (req.method() !== 'POST') return;
    try {
      const body = JSON.parse(req.postData());
      if (body.method) sent.push({ method: body.method, params: body.params, url: req.url(), headers: req.headers() });
    } catch (e) { /* not JSON-RPC */ }
  });
  // sign in with the one-time link of `xgr console --key` (docs/CONSOLE.md, "Signing in")
  const link = execFileSync(XGR, ['console', '--key', `${tmp}/wallet.key`, '--url', URL], { encoding: 'utf8' }).trim();
  await page.goto(link);
  await page.waitForFunction(me => document.querySelector('#mode').textContent.includes(me), { timeout: 10000 }, OWNER);
  await page.goto(`${URL}/ui/#/batch`);
  await page.waitForSelector('#bfilters');
  const set = async (name, v) => page.$eval(`#bfilters [name="${name}"]`, (e, val) => { e.value = val; }, v);
  await set('owner', OWNER);
  await set('status', 'waiting');
  await set('action', 'pause');
  await page.click('#bpreview');
  await page.waitForSelector('#bcount', { timeout: 10000 });
  ok(await page.$eval('#bcount', e => e.textContent) === '4', 'Preview (signed) counts the wallet\'s four sessions');
  await page.click('#bconfirm');
  await page.waitForFunction(() => document.querySelector('#bop') && document.querySelector('#bop').dataset.state === 'done',
    { timeout: 20000 });
  ok((await page.$eval('#bprog-text', e => e.textContent)).trim() === '4 / 4', 'the progress ends at 4 / 4');
  await page.screenshot({ path: path.join(OUT, 'batch-permit.png'), fullPage: true });
  const batch = sent.filter(s => s.method.startsWith('xgr.batch'));
  const methods = new Set(batch.map(s => s.method));
  ok(['xgr.batchPreview', 'xgr.batchStart', 'xgr.batchGet', 'xgr.batchList'].every(m => methods.has(m)),
    'preview, start, get and list were sent', [...methods]);
  ok(batch.every(s => s.url.endsWith('/ui/rpc') && !s.params.permit && s.headers['x-xgr-csrf']),
    'every batch call went to the console\'s /ui/rpc with the session\'s CSRF token and no permit: the sign-in names the caller');
  ok(JSON.parse(x('batch', 'preview', '--owner', OWNER, '--status', 'paused', '--json')).count === 4,
    'xgrd verified them: the four sessions are paused');
  const s1 = JSON.parse(x('show', '1', '--owner', OWNER, '--json'));
  const audit = s1.audit || [];
  ok(audit.length === 1 && audit[0].kind === 'pause' && audit[0].actor === OWNER && audit[0].detail.batch,
    'the audit entry names the wallet as actor and the operation', audit);
  ok(errors.length === 0, 'no errors in the page', errors);
}

run(main, { daemon, seconds: 150, after: async () => { if (browser) await browser.close(); } });
