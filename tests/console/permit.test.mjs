// permit.test.mjs XGR XGRD OUTDIR CHROMIUM — the console's permit mode with a test wallet.
//
// A test wallet (ethers, a fixed key) is injected into the page as an EIP-1193 provider
// (window.ethereum: eth_requestAccounts, eth_signTypedData_v4); it signs in node and records what it
// was asked to sign. The page must sign an xdalaPermit for its reads and a fresh ControlPermit for
// each action (ControlPermitV2 with runner = the owner when the wallet is not the owner) with the
// chain id and control contract of xgr_getCoreAddrs, and send them as params.permit.
//
// When xgrd has permit mode (`--auth permits`), it runs in it and verifies every permit itself; the
// CLI signs the setup calls with the same keys (--key). An xgrd without it (before the permits
// work is merged) runs with --auth none, and the two answers that differ in permit mode are given
// in the browser (xgr.console.info -> {"auth":"permit"}, xgr_getCoreAddrs -> chain 1887, contract
// 0x…0729, the documented defaults) while every other call reaches xgrd. Either way the test checks
// each permit the page sent: its shape (the types of SEMANTICS §9, in order), that it recovers to
// the wallet with ethers.verifyTypedData, its binding (action, sessionId, stepId) and that the
// action happened.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import { Wallet, verifyTypedData } from 'ethers';
import { ok, sleep, startXgrd, run } from './common.mjs';

const [XGR, XGRD, OUT, CHROMIUM] = process.argv.slice(2);
const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const wallet = new Wallet('0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318');
const OWNER = wallet.address.toLowerCase();
// (OTHER, a second owner with its own key, is defined below)
const CHAIN = '1887', CONTRACT = '0x0000000000000000000000000000000000000729';
const other = new Wallet('0x8da4ef21b864d2cc526dbdb2a120bd2874c36c9d0a1fb7f8c63d7f7a8b41de8f');
const OTHER = other.address.toLowerCase();
const REAL = execFileSync(XGRD, ['--help'], { encoding: 'utf8' }).includes('--auth permits');
console.log(`# ${REAL ? 'xgrd verifies the permits (--auth permits)' : 'xgrd has no permit mode yet: --auth none, two answers given in the browser'}`);
const { daemon, tmp, url } = startXgrd(XGRD, 'xgr-console-permit-', () => ['--auth', REAL ? 'permits' : 'none']);
writeFileSync(`${tmp}/wallet.key`, wallet.privateKey + '\n', { mode: 0o600 });
writeFileSync(`${tmp}/other.key`, other.privateKey + '\n', { mode: 0o600 });

const signed = [];   // what the wallet signed
const sent = [];     // {method, params} the page sent with a permit
const streams = [];  // the event streams the page opened

async function main() {
  const URL = await url();
  // the CLI signs for the wallet (or the other owner) when xgrd verifies permits
  const as = key => (...a) => execFileSync(XGR, [...a, '--url', URL, ...(REAL ? ['--key', `${tmp}/${key}.key`] : [])],
    { encoding: 'utf8' });
  const x = as('wallet'), y = as('other');
  x('deploy', path.join(SRC, 'examples/bundles/kyc_onboarding.json'), '--registry', 'kyc_onboarding');
  const allow = JSON.stringify({ __wakeUp: { steps: { ship: { internal: ['*'], rpc: [OWNER] } } } });
  x('enqueue', '--owner', OWNER, '--root', '1', '--registry', 'kyc_onboarding', '--step', 'order', '--payload', allow);
  x('enqueue', '--owner', OWNER, '--root', '2', '--registry', 'kyc_onboarding', '--step', 'order', '--payload', allow);
  // a session of another owner whose ship lets the wallet wake it (rpc allow list): ControlPermitV2
  y('deploy', path.join(SRC, 'examples/bundles/kyc_onboarding.json'), '--registry', 'kyc_other');
  y('enqueue', '--owner', OTHER, '--root', '3', '--registry', 'kyc_other', '--step', 'order', '--payload',
    JSON.stringify({ __wakeUp: { steps: { ship: { rpc: [OWNER] } } } }));
  await sleep(300);

  const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'] });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1440, height: 1000 });
    const errors = [];
    page.on('pageerror', e => errors.push(e.message));
    page.on('dialog', d => d.accept());
    await page.exposeFunction('__testWalletSign', async (from, json) => {
      const t = JSON.parse(json);
      const types = Object.assign({}, t.types);
      delete types.EIP712Domain;
      if (from.toLowerCase() !== OWNER) throw new Error('asked to sign for ' + from);
      const sig = await wallet.signTypedData(t.domain, types, t.message);
      signed.push(t);
      return sig;
    });
    await page.evaluateOnNewDocument(addr => {
      window.ethereum = { isTestWallet: true, request: async ({ method, params }) => {
        if (method === 'eth_requestAccounts' || method === 'eth_accounts') return [addr];
        if (method === 'eth_signTypedData_v4') return window.__testWalletSign(params[0], params[1]);
        throw Object.assign(new Error('unsupported: ' + method), { code: 4200 });
      } };
    }, wallet.address);
    await page.setRequestInterception(true);
    page.on('request', req => {
      if (req.url().includes('/ui/events')) streams.push({ url: new globalThis.URL(req.url()), auth: req.headers().authorization || '' });
      if (req.method() !== 'POST') return req.continue();
      let body;
      try { body = JSON.parse(req.postData()); } catch (e) { return req.continue(); }
      const answer = r => req.respond({ status: 200, contentType: 'application/json',
        body: JSON.stringify({ jsonrpc: '2.0', id: body.id, result: r }) });
      if (!REAL && body.method === 'xgr.console.info') return answer({ auth: 'permit', eventId: 0 });
      if (!REAL && body.method === 'xgr_getCoreAddrs') return answer({ chainId: CHAIN, precompile: CONTRACT });
      if (body.params && body.params.permit) sent.push({ method: body.method, params: body.params });
      return req.continue();
    });

    await page.goto(`${URL}/ui/#/sessions?owner=${OWNER}`);
    await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 2, { timeout: 10000 });
    ok((await page.$eval('#mode', e => e.textContent)).includes('permit mode'), 'the page says it is in permit mode');
    const reads = sent.filter(s => s.method === 'xgr.console.sessions');
    ok(reads.length >= 1 && reads[0].params.permit.primaryType === 'xdalaPermit', 'the list is read with an xdalaPermit', reads[0]);

    await page.goto(`${URL}/ui/#/session/${OWNER}/1`);
    await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting'), { timeout: 10000 });
    await page.waitForFunction(() => document.querySelector('#live.on'), { timeout: 10000 });
    ok(true, 'the event stream is open with the permit');
    if (REAL) {
      const bare = await fetch(`${URL}/ui/events?owner=${OWNER}`);
      ok(bare.status === 403, 'an event stream without a permit is refused (403)', bare.status);
      const other = await fetch(`${URL}/ui/events?owner=${OTHER}&permit=${encodeURIComponent(JSON.stringify(sent.find(x => x.params.permit.primaryType === 'xdalaPermit').params.permit))}`);
      ok(other.status === 403, "another owner's event stream is refused with the wallet's permit (403)", other.status);
    }
    await page.click('#a-pause');
    await page.waitForFunction(() => document.querySelector('#step-ship.st-paused'), { timeout: 10000 });
    await page.click('#a-resume');
    await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting'), { timeout: 10000 });
    await page.select('#w-mode', 'step');
    await page.select('#w-step', 'ship');
    await page.$eval('#w-payload', e => { e.value = '{"KycOk": true}'; });
    await page.click('#a-wake');
    await page.waitForFunction(() => document.querySelector('#sstatus') && document.querySelector('#sstatus').textContent.includes('completed'), { timeout: 10000 });
    ok(true, 'pause, resume and a step-mode wake went through with permits');
    await page.goto(`${URL}/ui/#/session/${OWNER}/2`);
    await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting'), { timeout: 10000 });
    await page.click('#a-kill');
    await page.waitForFunction(() => document.querySelector('#sstatus').textContent.includes('killed'), { timeout: 10000 });
    ok(true, 'kill went through with a permit');
    await page.screenshot({ path: path.join(OUT, 'permit-mode.png') });
    // the wallet may not read another owner's sessions, but it may wake one whose allow list names it:
    // the page's action code signs a ControlPermitV2 (runner = that owner)
    await page.goto(`${URL}/ui/#/session/${OTHER}/3`);
    await page.waitForSelector('main .err', { timeout: 10000 });
    ok((await page.$eval('main .err', e => e.textContent)).includes('may not read the sessions of'),
      "reading another owner's session is refused");
    await page.evaluate(o => act('xgr_wakeUpProcess', { runner: o, sessionId: '3', stepId: 'ship', payload: { KycOk: true } },
      'wake', '3', 'ship'), OTHER);
    const end3 = Date.now() + 10000;
    let st3;
    while (Date.now() < end3) {
      st3 = JSON.parse(y('show', '3', '--owner', OTHER, '--json')).session.status;
      if (st3 === 'completed') break;
      await sleep(100);
    }
    ok(st3 === 'completed', "a step-mode wake of another owner's session the allow list grants the wallet", st3);
    ok(errors.length === 0, 'no errors in the page', errors);
  } finally {
    await browser.close();
  }

  // every permit sent: shape, signer, binding
  const want = {
    xdalaPermit: ['from:address', 'expiry:uint256'],
    ControlPermit: ['from:address', 'sessionId:uint256', 'action:string', 'stepId:string', 'expiry:uint256'],
    ControlPermitV2: ['from:address', 'runner:address', 'sessionId:uint256', 'action:string', 'stepId:string', 'expiry:uint256'],
  };
  let good = 0;
  for (const s of sent) {
    const p = s.params.permit;
    const types = Object.assign({}, p.types);
    delete types.EIP712Domain;
    const fields = (p.types[p.primaryType] || []).map(f => `${f.name}:${f.type}`);
    const domainFields = p.types.EIP712Domain.map(f => f.name).join(',');
    const who = verifyTypedData(p.domain, types, p.message, p.signature).toLowerCase();
    const shapeOk = JSON.stringify(fields) === JSON.stringify(want[p.primaryType]) && Object.keys(p).sort().join() ===
      'domain,message,primaryType,signature,types' && String(p.domain.chainId) === CHAIN;
    const domOk = p.primaryType === 'xdalaPermit' ? domainFields === 'name,version,chainId' && p.domain.name === 'XDaLa Permit'
      : domainFields === 'name,version,chainId,verifyingContract' && p.domain.verifyingContract === CONTRACT && p.domain.name === 'XDaLa ControlPermit';
    const fresh = Number(p.message.expiry) > Date.now() / 1000;
    if (shapeOk && domOk && fresh && who === OWNER && s.params.from === OWNER) good++;
    else ok(false, `permit of ${s.method}`, { p, who });
  }
  ok(sent.length > 0 && good === sent.length, `all ${sent.length} permits the page sent recover to the wallet, with the §9 types and domains`);
  const sp = streams.map(st => st.auth.startsWith('XDaLaPermit ') ? JSON.parse(st.auth.slice(12)) : null);
  ok(streams.length >= 2 && sp.every(p => p && p.primaryType === 'xdalaPermit' && p.message.from === OWNER) &&
    streams.every(st => !st.url.searchParams.has('permit')),
    'event streams carry the reader\'s xdalaPermit in the Authorization header, never in the URL (logs and history keep URLs)',
    streams.map(st => `${st.url} ${st.auth.slice(0, 40)}`));
  const ctl = m => sent.filter(s => s.method === m).map(s => s.params.permit.message);
  const [pause] = ctl('xgr.pause'), [resume] = ctl('xgr.resume'), [kill] = ctl('xgr.kill'), [wake, wake2] = ctl('xgr_wakeUpProcess');
  ok(pause && pause.action === 'pause' && pause.sessionId === '1' && pause.stepId === '', 'pause: ControlPermit action pause, session 1', pause);
  ok(resume && resume.action === 'resume' && resume.sessionId === '1', 'resume: ControlPermit action resume', resume);
  ok(wake && wake.action === 'wake' && wake.sessionId === '1' && wake.stepId === 'ship', 'step-mode wake: stepId ship', wake);
  ok(wake2 && wake2.runner === OTHER && wake2.from === OWNER && wake2.stepId === 'ship' && wake2.sessionId === '3' &&
     sent.find(x => x.params.permit.message === wake2).params.permit.primaryType === 'ControlPermitV2',
     "waking another owner's session: ControlPermitV2 with runner = that owner", wake2);
  ok(kill && kill.action === 'kill' && kill.sessionId === '2', 'kill: ControlPermit action kill, session 2', kill);
  const xd = sent.filter(s => s.params.permit.primaryType === 'xdalaPermit');
  ok(new Set(xd.map(s => s.params.permit.signature)).size === 1, 'reads reuse one xdalaPermit until it nears expiry');
  const ctlSigs = sent.filter(s => s.params.permit.primaryType !== 'xdalaPermit').map(s => s.params.permit.signature);
  ok(new Set(ctlSigs).size === ctlSigs.length, 'every action has its own permit (single use)');
  ok(signed.length === 1 + ctlSigs.length, 'the wallet was asked once for reads and once per action', signed.length);
}

await run(main, { daemon, seconds: 120 });
