// signin.test.mjs XGR XGRD OUTDIR CHROMIUM — signing in to the console in a real browser (--auth permits).
//
// xgrd runs with --auth permits (its request log in a file); the CLI deploys and starts sessions
// of two owners, signing with their key files (--key). Then headless chromium:
//  1. opens the one-time link `xgr console --key` prints: the page exchanges its #signin fragment
//     for the session cookie, removes it from the address bar, and lists the signed-in owner's
//     sessions (owner column) and not the other owner's; the page is refused another owner's session;
//  2. pauses and resumes a session from its page, and kills another (the cookie and the page's
//     CSRF token; no permit);
//  2b. the other owner grants it READ+WRITE on its session 7 (`xgr grant`): the list shows that
//     session under "Granted to you" with its owner and rights; its page opens, a wake from the
//     page completes it, a kill from the page is refused (WRITE is no kill) and changes nothing;
//     once revoked (`xgr grant --revoke`), the list no longer shows it and its page is refused;
//  3. a page served by this test on another 127.0.0.1 port (another origin; the same site, so the
//     SameSite=Strict cookie goes along) auto-submits a form and makes fetch() calls (text/plain
//     without preflight, application/json with one, with and without credentials) against
//     /ui/rpc and POST / to pause and kill a session: it stays running and unpaused, and xgrd logged
//     the refusals;
//  4. signs out: the sign-in page is back, the cookie captured before no longer works (401), and
//     the link opened again is refused (its nonce was used);
//  5. a second browser profile signs in with a wallet (window.ethereum, personal_sign by ethers),
//     sees only its own sessions, and wakes a session of the first owner whose __wakeUp allow
//     list names it;
//  6. xgrd's log holds neither the link's signature nor its nonce nor a cookie.
// Screenshots go to OUTDIR (docs/console/ has copies).
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Wallet } from 'ethers';
import { ok, until, startXgrd, run, openPage } from './common.mjs';

const [XGR, XGRD, OUT, CHROMIUM] = process.argv.slice(2);
const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const wallet = new Wallet('0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318');
const other = new Wallet('0x8da4ef21b864d2cc526dbdb2a120bd2874c36c9d0a1fb7f8c63d7f7a8b41de8f');
const ME = wallet.address.toLowerCase(), OTHER = other.address.toLowerCase();
const { daemon, tmp, url } = startXgrd(XGRD, 'xgr-console-signin-', dir => ['--auth', 'permits', '--store',
  `sqlite:${dir}/store.db`, '--hibernate-after', '0'], { log: true });
writeFileSync(`${tmp}/me.key`, wallet.privateKey + '\n', { mode: 0o600 });
writeFileSync(`${tmp}/other.key`, other.privateKey + '\n', { mode: 0o600 });
let browser, evil;

async function main() {
  const URL = await url();
  await until('xgrd ready', async () => (await fetch(URL + '/readyz')).ok);
  const as = key => (...a) => execFileSync(XGR, [...a, '--url', URL, '--key', `${tmp}/${key}.key`], { encoding: 'utf8' });
  const x = as('me'), y = as('other');
  const bundle = path.join(SRC, 'examples/bundles/kyc_onboarding.json');
  x('deploy', bundle, '--registry', 'kyc_me');
  y('deploy', bundle, '--registry', 'kyc_other');
  const allow = JSON.stringify({ __wakeUp: { steps: { ship: { internal: ['*'], rpc: [ME, OTHER] } } } });
  for (const root of [1, 2, 3]) x('enqueue', '--owner', ME, '--root', String(root), '--registry', 'kyc_me', '--step', 'order', '--payload', allow);
  y('enqueue', '--owner', OTHER, '--root', '7', '--registry', 'kyc_other', '--step', 'order', '--payload', '{}');
  const show = (root, owner = ME) => JSON.parse((owner === ME ? x : y)('show', String(root), '--owner', owner, '--json')).session;
  await until('sessions wait at ship', () => show(1).status === 'running' && show(3).status === 'running');

  const { browser: b, page, pageErrors: errors } = await openPage(CHROMIUM, { height: 900 });
  browser = b;
  page.on('dialog', d => d.accept());
  const text = sel => page.$eval(sel, e => e.textContent);
  const shot = name => page.screenshot({ path: path.join(OUT, name) });

  // 0. not signed in: the sign-in page
  await page.goto(`${URL}/ui/`);
  await page.waitForSelector('#wallet-signin', { timeout: 10000 });
  ok((await text('#signin-cli')).includes(`xgr console --key FILE --url ${URL}`), 'the sign-in page says how to sign in without a wallet');
  await shot('12-signin.png');

  // 1. the one-time link
  const link = execFileSync(XGR, ['console', '--key', `${tmp}/me.key`, '--url', URL], { encoding: 'utf8' }).trim();
  const frag = new URLSearchParams(link.split('#')[1]);
  ok(link.startsWith(`${URL}/ui/#signin&m=`) && frag.get('s'), 'xgr console --key prints a link with the signed message in its fragment', link);
  await page.goto(link);
  await page.waitForFunction(me => document.querySelector('#mode').textContent.includes(me), { timeout: 10000 }, ME);
  ok(!page.url().includes('signin') && !page.url().includes(frag.get('s')), 'the link\'s fragment is gone from the address bar', page.url());
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 3, { timeout: 10000 });
  const owners = await page.$$eval('#sessions tbody tr td.owner', tds => tds.map(t => t.textContent.trim()));
  ok(owners.length === 3 && owners.every(o => o === ME), 'the list shows the signed-in owner\'s three sessions with an owner column, not the other owner\'s', owners);
  ok((await text('#list-owners')).includes('all owners you may see (1)'), 'the list reads every owner the caller may see', await text('#list-owners'));
  const cookies = await page.cookies();
  const ck = cookies.find(c => c.name === 'xgr_console');
  ok(ck && ck.httpOnly && ck.sameSite === 'Strict' && ck.path === '/ui' && !ck.secure, 'the session cookie: HttpOnly, SameSite=Strict, Path=/ui', ck);
  ok(!(await page.evaluate(() => document.cookie)).includes('xgr_console'), 'the page\'s script cannot read the cookie');
  await shot('13-signed-in-sessions.png');
  await page.goto(`${URL}/ui/#/session/${OTHER}/7`);
  await page.waitForSelector('main .err', { timeout: 10000 });
  ok((await text('main .err')).includes('may not read the sessions of'), 'another owner\'s session page is refused', await text('main .err'));

  // 2. act: pause, resume, kill
  await page.goto(`${URL}/ui/#/session/${ME}/1`);
  await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting'), { timeout: 10000 });
  await page.waitForFunction(() => document.querySelector('#live.on'), { timeout: 10000 });
  ok(true, 'the session page and its event stream (by cookie) are open');
  await page.click('#a-pause');
  await page.waitForFunction(() => document.querySelector('#step-ship.st-paused'), { timeout: 10000 });
  ok(show(1).paused === true, 'pause from the page paused session 1');
  await page.click('#a-resume');
  await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting'), { timeout: 10000 });
  ok(show(1).paused === false, 'resume from the page resumed it');
  await page.goto(`${URL}/ui/#/session/${ME}/2`);
  await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting'), { timeout: 10000 });
  await page.click('#a-kill');
  await page.waitForFunction(() => document.querySelector('#sstatus').textContent.includes('killed'), { timeout: 10000 });
  ok(show(2).status === 'killed', 'kill from the page killed session 2');

  // 2b. a session granted by another owner: listed, readable, woken from the page; kill refused
  y('enqueue', '--owner', OTHER, '--root', '8', '--registry', 'kyc_other', '--step', 'order', '--payload', '{}');
  await until('session 8 waits at ship', () => show(8, OTHER).status === 'running');
  y('grant', '7', '--to', ME, '--rights', 'read,write', '--expires', '1h');
  y('grant', '8', '--to', ME, '--rights', 'read', '--expires', '1h');
  const grants = JSON.parse(x('grants', '--json')).items;
  ok(grants.length === 2 && grants.every(g => g.owner === OTHER && g.grantee === ME), '`xgr grants` lists the two grants to the signed-in owner', grants);
  await page.goto(`${URL}/ui/#/sessions`);
  await page.waitForFunction(() => document.querySelectorAll('#granted tbody tr').length === 2, { timeout: 10000 });
  const gRows = await page.$$eval('#granted tbody tr', trs => trs.map(tr => [...tr.querySelectorAll('td')].map(t => t.textContent.trim())));
  ok(gRows[0][0] === '8' && gRows[1][0] === '7' && gRows.every(r => r[1] === OTHER) && gRows[0][2] === 'read' && gRows[1][2] === 'read, write',
    'the list shows the two granted sessions, newest first, with their owner and the rights held', gRows);
  ok((await page.$$('#sessions tbody tr')).length === 3, 'the own list still has the owner\'s three sessions');
  await shot('14-granted-sessions.png');
  await page.click('#granted tbody tr:nth-child(2) a');
  await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting'), { timeout: 10000 });
  ok(page.url().endsWith(`#/session/${OTHER}/7`), 'the granted session\'s page opens', page.url());
  const shipPid = JSON.parse(y('show', '7', '--owner', OTHER, '--json')).processes.find(p => p.status === 'waiting').pid;
  await page.click('#a-kill');
  await page.waitForFunction(() => !document.querySelector('#toast').hidden && document.querySelector('#toast').classList.contains('bad'), { timeout: 10000 });
  ok((await text('#toast')).includes('only its owner and xgrd\'s operators may'), 'a kill from the page is refused: WRITE allows waking, not killing', await text('#toast'));
  ok(show(7, OTHER).status === 'running', 'the refused kill changed nothing');
  await page.$eval('#w-pid', (e, v) => { e.value = v; }, shipPid);
  await page.$eval('#w-payload', e => { e.value = '{"KycOk": true}'; });
  await page.click('#a-wake');
  await until('session 7 completes', () => show(7, OTHER).status === 'completed');
  await page.waitForFunction(() => document.querySelector('#sstatus').textContent.includes('completed'), { timeout: 10000 });
  ok(true, 'a wake from the page (WRITE grant) completed the other owner\'s session 7');
  await shot('15-granted-session-woken.png');
  const audit = JSON.parse(y('show', '7', '--owner', OTHER, '--json')).audit;
  ok(audit.some(a => a.kind === 'wake' && a.actor === ME) && audit.some(a => a.kind === 'grant'),
    'the audit trail has the grant and the grantee\'s wake', audit.map(a => [a.kind, a.actor]));
  // the session page made the other owner the list's owner: the list shows what of it is granted
  await page.goto(`${URL}/ui/#/sessions`);
  await page.waitForFunction(() => document.querySelectorAll('#granted tbody tr').length === 2, { timeout: 10000 });
  ok((await page.$eval('#owner', e => e.value)) === OTHER && (await page.$$('#sessions tbody tr')).length === 0,
    'the list of the other owner shows only its sessions granted to the signed-in owner');
  y('grant', '7', '--to', ME, '--revoke');
  y('grant', '8', '--to', ME, '--revoke');
  await page.goto(`${URL}/ui/#/sessions?owner=${OTHER}&status=`);
  await page.waitForSelector('main .err', { timeout: 10000 });
  ok((await text('main .err')).includes('may not read the sessions of'), 'after the revokes that list is refused', await text('main .err'));
  await page.goto(`${URL}/ui/#/sessions?owner=${ME}`);
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 3, { timeout: 10000 });
  ok((await page.$$('#granted tbody tr')).length === 0, 'and the own list shows no granted session');
  await page.goto(`${URL}/ui/#/session/${OTHER}/8`);
  await page.waitForSelector('main .err', { timeout: 10000 });
  ok((await text('main .err')).includes('may not read'), 'the revoked session\'s page is refused', await text('main .err'));
  await page.goto(`${URL}/ui/#/sessions?owner=${ME}`);
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 3, { timeout: 10000 });

  // 3. another origin: a form and fetch() calls against the action endpoints
  const target = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'xgr.pause', params: { owner: ME, pid: '3' } });
  const kill = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'xgr.kill', params: { owner: ME, pid: '3' } });
  const evilPage = `<!doctype html><html><body><h1>another site</h1>
    <form id="f" method="POST" action="${URL}/ui/rpc" enctype="text/plain" target="sink">
      <input name='${target.slice(0, -1)},"x":"' value='"}'></form>
    <form id="g" method="POST" action="${URL}/" enctype="text/plain" target="sink2">
      <input name='${kill.slice(0, -1)},"x":"' value='"}'></form>
    <iframe name="sink"></iframe><iframe name="sink2"></iframe><pre id="out"></pre>
    <script>
      const out = [];
      const tries = [
        ['/ui/rpc', { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'Content-Type': 'text/plain' }, body: ${JSON.stringify(target)} }],
        ['/ui/rpc', { method: 'POST', credentials: 'include', headers: { 'Content-Type': 'application/json' }, body: ${JSON.stringify(kill)} }],
        ['/', { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body: ${JSON.stringify(kill)} }],
        ['/', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: ${JSON.stringify(kill)} }],
      ];
      (async () => {
        document.getElementById('f').submit();
        document.getElementById('g').submit();
        for (const [p, o] of tries) {
          try { const r = await fetch('${URL}' + p, o); out.push(p + ' ' + r.type + ' ' + r.status); }
          catch (e) { out.push(p + ' refused: ' + e.message); }
        }
        document.getElementById('out').textContent = out.join('\\n');
        document.title = 'done';
      })();
    </script></body></html>`;
  evil = createServer((req, res) => { res.writeHead(200, { 'Content-Type': 'text/html' }); res.end(evilPage); });
  await new Promise(r => evil.listen(0, '127.0.0.1', r));
  const EVIL = `http://127.0.0.1:${evil.address().port}`;
  // the console's own page must be gone, and its last calls (a list refreshed by the events of the
  // actions above) answered and logged, before the log is read from here: leave it, then wait
  // until xgrd's log has been quiet for half a second
  await page.goto('about:blank');
  let quiet = readFileSync(`${tmp}/xgrd.log`, 'utf8').length;
  await until('xgrd\'s log quiet after the console page closed', async () => {
    await new Promise(r => setTimeout(r, 500));
    const now = readFileSync(`${tmp}/xgrd.log`, 'utf8').length;
    const same = now === quiet;
    quiet = now;
    return same;
  });
  const before = readFileSync(`${tmp}/xgrd.log`, 'utf8').length;
  await page.goto(EVIL + '/');
  await page.waitForFunction(() => document.title === 'done', { timeout: 10000 });
  const tried = await text('#out');
  await until('xgrd logged the cross-origin requests', () =>
    (readFileSync(`${tmp}/xgrd.log`, 'utf8').slice(before).match(/status=403/g) || []).length >= 4);
  const refusals = readFileSync(`${tmp}/xgrd.log`, 'utf8').slice(before).split('\n').filter(l => /path=\/(ui\/rpc)? /.test(l));
  const s3 = show(3);
  ok(s3.status === 'running' && !s3.paused, 'the other origin\'s form posts and fetch() calls changed nothing: session 3 runs, unpaused', { s3, tried });
  ok(refusals.length >= 4 && refusals.every(l => /status=40[35] /.test(l)),
    'xgrd refused each of them (403 cross-origin; a CORS preflight OPTIONS 405, so the browser does not send the call)',
    refusals.map(l => /http=.*status=[0-9]+/.exec(l)[0]));
  await page.screenshot({ path: path.join(OUT, 'cross-origin.png') });

  // 4. sign-out
  const csrf = await (async () => { await page.goto(`${URL}/ui/#/sessions`); await page.waitForSelector('#signout:not([hidden])');
    return page.evaluate(() => state.me.csrf); })();
  await page.click('#signout');
  await page.waitForSelector('#wallet-signin', { timeout: 10000 });
  ok((await text('#signin-why')).includes('Signed out'), 'sign-out shows the sign-in page');
  const stale = await fetch(URL + '/ui/rpc', { method: 'POST', headers: { 'Content-Type': 'application/json', Cookie: `xgr_console=${ck.value}`,
    'X-XGR-CSRF': csrf }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'xgr.console.sessions', params: {} }) });
  ok(stale.status === 401, 'the cookie from before the sign-out no longer works (401)', stale.status);
  await page.goto(link);
  await page.waitForSelector('#signin-why', { timeout: 10000 });
  ok((await text('#signin-why')).includes('used already'), 'the link opened a second time is refused (its nonce was used)', await text('#signin-why'));

  // 5. a wallet in a second profile (its own cookies)
  const ctx = await browser.createBrowserContext();
  const wp = await ctx.newPage();
  await wp.setViewport({ width: 1440, height: 900 });
  wp.on('pageerror', e => errors.push(e.message));
  const asked = [];
  await wp.exposeFunction('__walletSign', async (hex, from) => {
    const msg = Buffer.from(hex.slice(2), 'hex').toString('utf8');
    asked.push(msg);
    if (from.toLowerCase() !== OTHER) throw new Error('asked to sign for ' + from);
    return other.signMessage(msg);
  });
  await wp.evaluateOnNewDocument(addr => {
    window.ethereum = { request: async ({ method, params }) => {
      if (method === 'eth_requestAccounts' || method === 'eth_accounts') return [addr];
      if (method === 'personal_sign') return window.__walletSign(params[0], params[1]);
      throw Object.assign(new Error('unsupported: ' + method), { code: 4200 });
    } };
  }, other.address);
  await wp.goto(`${URL}/ui/`);
  await wp.waitForSelector('#wallet-signin', { timeout: 10000 });
  await wp.click('#wallet-signin');
  await wp.waitForFunction(o => document.querySelector('#mode').textContent.includes(o), { timeout: 10000 }, OTHER);
  await wp.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 2, { timeout: 10000 });
  const wOwners = await wp.$$eval('#sessions tbody tr td.owner', tds => tds.map(t => t.textContent.trim()));
  ok(wOwners.length === 2 && wOwners.every(o => o === OTHER), 'signed in with the wallet, the list shows that owner\'s sessions only', wOwners);
  const m = asked[0] || '';
  ok(asked.length === 1 && m.startsWith(`${URL.replace('http://', '')} wants you to sign in with your Ethereum account:\n${other.address}\n`) &&
     m.includes(`URI: ${URL}/ui/`) && m.includes('Chain ID: 1887') && /Nonce: [0-9a-f]{32}/.test(m) && m.includes('Expiration Time: '),
     'the wallet was asked once, to personal_sign an EIP-4361 message for this host', m);
  await wp.evaluate(o => act('xgr_wakeUpProcess', { runner: o, sessionId: '3', stepId: 'ship', payload: { KycOk: true } }), ME);
  await until('session 3 completes', () => show(3).status === 'completed');
  ok(true, 'the wallet woke the first owner\'s session its __wakeUp allow list names (step mode, no permit)');
  await ctx.close();

  // 6. no secret in the log
  const log = readFileSync(`${tmp}/xgrd.log`, 'utf8');
  const nonce = /Nonce: ([0-9a-f]+)/.exec(frag.get('m'))[1];
  const leaked = [frag.get('s'), nonce, ck.value].filter(s => log.includes(s));
  ok(log.includes('path=/ui/auth/signin') && leaked.length === 0, 'xgrd\'s log has neither the link\'s signature, nor its nonce, nor the cookie', leaked);
  ok(errors.length === 0, 'no errors in the pages', errors);
}

await run(main, { daemon, seconds: 150, after: async () => { if (browser) await browser.close(); if (evil) evil.close(); },
  note: `; screenshots in ${OUT}` });
