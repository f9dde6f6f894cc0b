// siwe.test.mjs XGR XGRD OUTDIR — the console's sign-in endpoints without a browser (node and ethers).
//
// xgrd runs with --auth permits, small caps (--console-max-nonces 4, --console-max-sessions 2) and
// its request log in a file. Messages are signed by ethers' Wallet.signMessage, as a wallet's
// personal_sign would. Checked: a good sign-in answers a cookie (HttpOnly, SameSite=Strict,
// Path=/ui, Max-Age) and a CSRF token, and /ui/rpc then knows the caller; each refusal says why
// and names the field — a bad signature, a reused nonce, an expired message, a wrong domain, a
// wrong chain id, a nonce xgrd never issued; the nonce table's cap evicts the oldest (metric); the
// session table's cap ends the oldest session (metric); /ui/rpc without the CSRF token, from a
// foreign Origin, or with a method outside the console's, changes nothing; an event stream opens
// by cookie and refuses a permit in its URL; sign-out ends the session and its event streams; `xgr console --key` prints a
// link that signs in once; an operator (--operator) signed in lists and pauses another owner's
// session (the audit names the operator), another address signed in cannot; and xgrd's log holds
// none of the secrets.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Wallet } from 'ethers';
import { ok, until, startXgrd, run } from './common.mjs';

const [XGR, XGRD] = process.argv.slice(2);
const wallet = new Wallet('0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318');
const other = new Wallet('0x8da4ef21b864d2cc526dbdb2a120bd2874c36c9d0a1fb7f8c63d7f7a8b41de8f');
const operator = new Wallet('0x' + 'a5'.repeat(32));
const ME = wallet.address.toLowerCase(), OP = operator.address.toLowerCase();
const { daemon, tmp, url } = startXgrd(XGRD, 'xgr-console-siwe-', dir => ['--auth', 'permits', '--store',
  `sqlite:${dir}/store.db`, '--console-max-nonces', '4', '--console-max-sessions', '2', '--operator', OP], { log: true });
writeFileSync(`${tmp}/wallet.key`, wallet.privateKey + '\n', { mode: 0o600 });

let U, HOST;
const secrets = [];   // nonces, signatures and cookies that must not reach the log

async function post(path, body, headers = {}) {
  const r = await fetch(U + path, { method: 'POST', headers: Object.assign({ 'Content-Type': 'application/json' }, headers),
    body: JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
  return { status: r.status, json, text, cookie: r.headers.get('set-cookie') };
}
const message = (f, o = {}) => {
  const m = Object.assign({}, f, o);
  return `${m.domain} wants you to sign in with your Ethereum account:\n${m.address}\n\nSign in to the xgr console.\n\n` +
    `URI: ${m.uri}\nVersion: 1\nChain ID: ${m.chainId}\nNonce: ${m.nonce}\nIssued At: ${m.issuedAt}\nExpiration Time: ${m.expirationTime}`;
};
async function nonce() {
  const r = await post('/ui/auth/nonce', {});
  if (r.status !== 200) throw new Error('nonce: ' + r.text);
  secrets.push(r.json.nonce);
  return r.json;
}
async function signin(w, o = {}, f = null) {
  f = f || await nonce();
  const m = message(f, Object.assign({ address: w.address }, o));
  const sig = o.signature || await (o.signer || w).signMessage(m);
  secrets.push(sig);
  const r = await post('/ui/auth/signin', { message: m, signature: sig });
  if (r.cookie) secrets.push(r.cookie.split(';')[0].split('=')[1]);
  return Object.assign(r, { m, sig });
}
const rpc = (cookie, csrf, method, params, headers = {}) =>
  post('/ui/rpc', { jsonrpc: '2.0', id: 1, method, params }, Object.assign({ Cookie: cookie, 'X-XGR-CSRF': csrf }, headers));
const metric = async name => {
  const t = await (await fetch(U + '/metrics')).text();
  const l = t.split('\n').find(x => x.startsWith(name + ' '));
  return l ? Number(l.split(' ')[1]) : NaN;
};

async function main() {
  U = await url();
  HOST = U.replace('http://', '');
  await until('xgrd ready', async () => (await fetch(U + '/readyz')).ok);
  const x = (...a) => execFileSync(XGR, [...a, '--url', U, '--key', `${tmp}/wallet.key`], { encoding: 'utf8' });
  x('deploy', new URL('../../examples/bundles/kyc_onboarding.json', import.meta.url).pathname, '--registry', 'kyc');
  x('enqueue', '--owner', ME, '--root', '1', '--registry', 'kyc', '--step', 'order', '--payload', '{}');

  // the nonce answer: the message's fields
  const f = await nonce();
  ok(f.domain === HOST && f.uri === `${U}/ui/` && f.chainId === 1887 && /^[0-9a-f]{32}$/.test(f.nonce) && f.nonceSecs === 300,
    'a nonce comes with domain = the Host, uri, chain id and its life', f);

  // a good sign-in
  const good = await signin(wallet, {}, f);
  const c = good.cookie || '';
  ok(good.status === 200 && good.json.address === ME && /^[0-9a-f]{64}$/.test(good.json.csrf), 'a signed message signs in', good.text);
  ok(/^xgr_console=[0-9a-f]{64}; Path=\/ui; Max-Age=1800; HttpOnly; SameSite=Strict$/.test(c),
    'the cookie: HttpOnly, SameSite=Strict, Path=/ui, Max-Age 1800, not Secure over plain http', c);
  const cookie = c.split(';')[0], csrf = good.json.csrf;
  const list = await rpc(cookie, csrf, 'xgr.console.sessions', {});
  ok(list.json.result && list.json.result.items.length === 1 && list.json.result.items[0].owner === ME,
    'signed in, /ui/rpc lists the caller\'s sessions without naming an owner', list.text);
  const foreign = await rpc(cookie, csrf, 'xgr.console.sessions', { owner: other.address.toLowerCase() });
  ok(foreign.json.error && foreign.json.error.code === -32007, 'another owner\'s sessions are refused -32007', foreign.text);

  // refusals, each naming the field
  const again = await post('/ui/auth/signin', { message: good.m, signature: good.sig });
  ok(again.status === 403 && again.json.path === 'message.nonce' && /used already/.test(again.json.error),
    'a reused nonce is refused (message.nonce)', again.text);
  const badsig = await signin(wallet, { signer: other });
  ok(badsig.status === 403 && badsig.json.path === 'signature' && /not by the message's address/.test(badsig.json.error),
    'a signature by another key is refused (signature)', badsig.text);
  const garbled = await signin(wallet, { signature: '0x' + '11'.repeat(65) });
  ok(garbled.status === 403 && garbled.json.path === 'signature', 'a garbled signature is refused (signature)', garbled.text);
  const past = new Date(Date.now() - 1000).toISOString();
  const expired = await signin(wallet, { expirationTime: past });
  ok(expired.status === 403 && expired.json.path === 'message.expirationTime' && /expired/.test(expired.json.error),
    'an expired message is refused (message.expirationTime)', expired.text);
  const dom = await signin(wallet, { domain: 'evil.example:443', uri: 'https://evil.example/ui/' });
  ok(dom.status === 403 && dom.json.path === 'message.domain' && dom.json.error.includes(HOST),
    'a message for another domain is refused (message.domain)', dom.text);
  const chain = await signin(wallet, { chainId: 1 });
  ok(chain.status === 403 && chain.json.path === 'message.chainId', 'another chain id is refused (message.chainId)', chain.text);
  const made = await signin(wallet, {}, Object.assign({}, await nonce(), { nonce: 'abcdef0123456789abcdef0123456789' }));
  ok(made.status === 403 && made.json.path === 'message.nonce', 'a nonce xgrd never issued is refused', made.text);
  const junk = await post('/ui/auth/signin', { message: 'hello', signature: '0x00' });
  ok(junk.status === 400 && junk.json.path === 'message' && /EIP-4361/.test(junk.json.error), 'a message that is not EIP-4361 is refused (message)', junk.text);

  // the nonce table's cap (4): a fifth evicts the oldest
  const ns = [];
  for (let i = 0; i < 5; i++) ns.push(await nonce());
  ok(await metric('xgr_console_nonces') === 4, 'the nonce table holds at most --console-max-nonces (4)', await metric('xgr_console_nonces'));
  ok(await metric('xgr_console_nonces_evicted_total') >= 1, 'an eviction is counted', await metric('xgr_console_nonces_evicted_total'));
  const evicted = await signin(wallet, {}, ns[0]);
  ok(evicted.status === 403 && evicted.json.path === 'message.nonce', 'the evicted (oldest) nonce no longer signs in', evicted.text);
  const newest = await signin(wallet, {}, ns[4]);
  ok(newest.status === 200, 'the newest nonce still signs in', newest.text);

  // CSRF and the console's methods only
  const noToken = await post('/ui/rpc', { jsonrpc: '2.0', id: 1, method: 'xgr.pause', params: { owner: ME, pid: '1' } }, { Cookie: cookie });
  ok(noToken.status === 403 && /X-XGR-CSRF/.test(noToken.text), '/ui/rpc without the CSRF token is refused 403', noToken.text);
  const crossOrigin = await rpc(cookie, csrf, 'xgr.pause', { owner: ME, pid: '1' }, { Origin: 'http://127.0.0.1:1' });
  ok(crossOrigin.status === 403 && /cross-origin/.test(crossOrigin.text), 'a foreign Origin is refused 403', crossOrigin.text);
  const crossSite = await rpc(cookie, csrf, 'xgr.pause', { owner: ME, pid: '1' }, { 'Sec-Fetch-Site': 'same-site' });
  ok(crossSite.status === 403, 'Sec-Fetch-Site: same-site (another port) is refused 403', crossSite.text);
  const plain = await fetch(U + '/ui/rpc', { method: 'POST', headers: { 'Content-Type': 'text/plain', Cookie: cookie },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'xgr.pause', params: { owner: ME, pid: '1' } }) });
  ok(plain.status === 415, 'a text/plain body (what a form can send) is refused 415', plain.status);
  const outside = await rpc(cookie, csrf, 'xgr.enqueue', { owner: ME });
  ok(outside.json.error && outside.json.error.code === -32601 && /not served at \/ui\/rpc/.test(outside.json.error.message),
    'a method outside the console\'s is not served at /ui/rpc', outside.text);
  const s1 = await rpc(cookie, csrf, 'xgr.console.session', { owner: ME, rootPid: '1' });
  ok(s1.json.result && !s1.json.result.session.paused, 'nothing above paused session 1', s1.text);
  const paused = await rpc(cookie, csrf, 'xgr.pause', { owner: ME, pid: '1' });
  ok(paused.json.result && paused.json.result.ok, 'signed in, with the token and same origin, pause works', paused.text);
  const audit = await rpc(cookie, csrf, 'xgr.console.session', { owner: ME, rootPid: '1', histOrder: 'asc' });
  const row = audit.json.result.history.items.find(h => h.status === 'audit');
  ok(row && row.audit.actor === ME && !row.audit.permitDigest, 'the audit trail names the signed-in address as the actor', row);
  await rpc(cookie, csrf, 'xgr.resume', { owner: ME, pid: '1' });

  // event streams: by cookie, never a permit in the URL
  const ctl = new AbortController();
  const es = await fetch(U + '/ui/events', { headers: { Cookie: cookie }, signal: ctl.signal });
  ok(es.status === 200 && es.headers.get('content-type').startsWith('text/event-stream'), 'an event stream opens by cookie', es.status);
  ctl.abort();
  const none = await fetch(U + '/ui/events');
  ok(none.status === 403, 'an event stream without a sign-in is refused 403', none.status);
  const inUrl = await fetch(U + '/ui/events?owner=' + ME + '&permit=%7B%7D', { headers: { Cookie: cookie } });
  ok(inUrl.status === 400 && /not taken in the URL/.test(await inUrl.text()), 'a permit in the URL is refused 400', inUrl.status);
  const otherStream = await fetch(U + '/ui/events?owner=' + other.address.toLowerCase(), { headers: { Cookie: cookie } });
  ok(otherStream.status === 403, 'a stream of another owner\'s events is refused 403', otherStream.status);

  // the session table's cap (2): a third sign-in ends the oldest session
  const s2 = await signin(wallet);
  const s3 = await signin(wallet);
  ok(s2.status === 200 && s3.status === 200, 'two more sign-ins', [s2.text, s3.text]);
  ok(await metric('xgr_console_sessions') === 2, 'at most --console-max-sessions (2) live', await metric('xgr_console_sessions'));
  ok(await metric('xgr_console_sessions_evicted_total') >= 1, 'the session ended early is counted', await metric('xgr_console_sessions_evicted_total'));
  const old = await rpc(cookie, csrf, 'xgr.console.sessions', {});
  ok(old.status === 401, 'the oldest session no longer works', old.text);

  // sign-out ends the session on the server
  const c3 = s3.cookie.split(';')[0];
  const me = await post('/ui/auth/me', {}, { Cookie: c3 });
  ok(me.json.address === ME, '/ui/auth/me names the signed-in address', me.text);
  const live = await fetch(U + '/ui/events', { headers: { Cookie: c3 } });
  ok(live.status === 200, 'a stream open with that sign-in', live.status);
  const reader = live.body.pipeThrough(new TextDecoderStream()).getReader();
  const out = await post('/ui/auth/signout', {}, { Cookie: c3 });
  ok(out.json.signedOut === true && /Max-Age=0/.test(out.cookie), 'sign-out ends the session and clears the cookie', out.text);
  let got = '';
  const deadline = Date.now() + 10000;
  while (!got.includes('event: end') && Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    got += value;
  }
  ok(/event: end\ndata: \{"reason":"signed out"\}/.test(got), 'sign-out ends the event streams of that sign-in', got.slice(-200));
  const after = await rpc(c3, s3.json.csrf, 'xgr.console.sessions', {});
  ok(after.status === 401, 'after sign-out the cookie no longer works (401)', after.text);

  // `xgr console --key`: a one-time link
  const link = x('console', '--json');
  const l = JSON.parse(link);
  secrets.push(l.signature);
  ok(l.link.startsWith(`${U}/ui/#signin&m=`) && l.link.includes('&s=' + l.signature) && l.address.toLowerCase() === ME,
    'xgr console --key prints a link with message and signature in the fragment', l.link);
  const p = new URLSearchParams(l.link.split('#')[1]);
  const used = await post('/ui/auth/signin', { message: p.get('m'), signature: p.get('s') });
  ok(used.status === 200 && used.json.address === ME, 'the link\'s message and signature sign in', used.text);
  if (used.cookie) secrets.push(used.cookie.split(';')[0].split('=')[1]);
  const twice = await post('/ui/auth/signin', { message: p.get('m'), signature: p.get('s') });
  ok(twice.status === 403 && twice.json.path === 'message.nonce', 'a second use of the link is refused', twice.text);
  // --open hands the link to $BROWSER (xdg-open without it)
  writeFileSync(`${tmp}/browser.sh`, `#!/bin/sh\nprintf '%s' "$1" > ${tmp}/opened\n`, { mode: 0o700 });
  const printed = execFileSync(XGR, ['console', '--open', '--url', U, '--key', `${tmp}/wallet.key`],
    { encoding: 'utf8', env: Object.assign({}, process.env, { BROWSER: `${tmp}/browser.sh` }), stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  const opened = readFileSync(`${tmp}/opened`, 'utf8');
  secrets.push(new URLSearchParams(printed.split('#')[1]).get('s'));
  ok(opened === printed && printed.startsWith(`${U}/ui/#signin&m=`), 'xgr console --open opens the link it prints ($BROWSER)', [printed.slice(0, 60), opened.slice(0, 60)]);
  let help = '';
  try { execFileSync(XGR, ['console', '--help'], { encoding: 'utf8' }); help = execFileSync(XGR, ['console', '--help'], { encoding: 'utf8' }); } catch (e) { help = e.stdout; }
  ok(/one-time sign-in link/.test(help) && /--key FILE/.test(help), 'xgr console --help', help);
  let noKey = '';
  try { execFileSync(XGR, ['console', '--url', U], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }); } catch (e) { noKey = e.stderr; }
  ok(/--key FILE is required/.test(noKey), 'xgr console without --key says what it needs', noKey);

  // behind a TLS-terminating proxy the cookie is Secure
  const fs = await nonce();
  const mt = message(fs, { address: wallet.address, uri: `https://${HOST}/ui/` });
  const tls = await post('/ui/auth/signin', { message: mt, signature: await wallet.signMessage(mt) }, { 'X-Forwarded-Proto': 'https' });
  if (tls.cookie) secrets.push(tls.cookie.split(';')[0].split('=')[1]);
  ok(tls.status === 200 && /; Secure$/.test(tls.cookie || ''), 'served over https (X-Forwarded-Proto), the cookie is Secure', tls.cookie);

  // an operator signed in acts on another owner's session; a non-operator cannot
  const op = await signin(operator);
  const oc = (op.cookie || '').split(';')[0], ocsrf = op.json && op.json.csrf;
  const all = await rpc(oc, ocsrf, 'xgr.console.sessions', {});
  ok(all.json.result && all.json.result.items.some(i => i.owner === ME && i.rootPid === '1'),
    'an operator signed in lists every owner\'s sessions', all.text);
  const opPause = await rpc(oc, ocsrf, 'xgr.pause', { owner: ME, pid: '1' });
  ok(opPause.json.result && opPause.json.result.ok, 'an operator signed in pauses another owner\'s session', opPause.text);
  const opAudit = await rpc(oc, ocsrf, 'xgr.console.session', { owner: ME, rootPid: '1', histOrder: 'desc' });
  const opRow = opAudit.json.result.history.items.find(h => h.status === 'audit');
  ok(opRow && opRow.audit.kind === 'pause' && opRow.audit.actor === OP, 'the audit names the operator', opRow);
  await rpc(oc, ocsrf, 'xgr.resume', { owner: ME, pid: '1' });
  const st = await signin(other);
  const sc = (st.cookie || '').split(';')[0];
  const stranger = await rpc(sc, st.json && st.json.csrf, 'xgr.pause', { owner: ME, pid: '1' });
  ok(stranger.json.error && stranger.json.error.code === -32007, 'another address signed in cannot pause it (-32007)', stranger.text);
  const s1b = await rpc(oc, ocsrf, 'xgr.console.session', { owner: ME, rootPid: '1' });
  ok(s1b.json.result && !s1b.json.result.session.paused, 'session 1 runs unpaused again', s1b.text);

  // no secret in xgrd's log
  await until('the log line of the last request', () => readFileSync(`${tmp}/xgrd.log`, 'utf8').includes('/ui/auth/signin'));
  const log = readFileSync(`${tmp}/xgrd.log`, 'utf8');
  const leaked = secrets.filter(s => s && log.includes(s));
  ok(log.includes('path=/ui/auth/signin') && !leaked.length, `xgrd's log has none of the ${secrets.length} nonces, signatures and cookies`, leaked);
}

await run(main, { daemon, seconds: 60 });
