// grants.js URL PHASE KEYS... — grants and operators (docs/SEMANTICS.md "Access") as wallets use
// them, against a real xgrd in permit mode that grants_ethers.sh set up: the owner's KYC sessions
// 1, 2 and 3 of tests/permits/data/kyc.json each ran step K, whose branch granted READ (1) to the
// auditor, READ+WRITE (3) to the writer and READ+MANAGE (5) to the manager; W of each waits.
// Every permit is signed by ethers' Wallet.signTypedData (what eth_signTypedData_v4 does), with
// the chain id and control contract xgr_getCoreAddrs gives. Checked with exact JSON-RPC codes:
//   phase 1: the auditor reads session 1 (getSession and its history, marked "grant"), lists it,
//            receives its events (GET /ui/events) and cannot kill or wake it (-32007); the writer
//            wakes W by pid; the manager grants a newcomer READ but not WRITE (it holds none); a
//            stranger's manageGrants is refused and stores nothing; listGrants pages with a cursor;
//            the owner shortens the auditor's grant to a few seconds: after that instant the same
//            reads, listing and events are refused (-32007) without a restart; an operator reads
//            and kills the owner's session 2 (recorded with the operator as actor), a non-operator
//            cannot kill session 3; a grantee's open event stream of session 3 receives its
//            events (the owner pauses it) until the owner revokes the grant: then it gets one
//            `event: end` {"reason":"access revoked"} and ends, and the owner's resume that follows
//            is not delivered to it.
//   phase 2 (after xgrd restarted on the same store): the grants are still there and work.
'use strict';
const { ethers } = require('ethers');
const { CONTROL_V2, XDALA, make, client } = require('./permits.js');

const [URL, PHASE, OWNER_KEY, AUDITOR_KEY, WRITER_KEY, MANAGER_KEY, NEWBIE_KEY, STRANGER_KEY, OPERATOR_KEY] =
  process.argv.slice(2);
const W = (k) => new ethers.Wallet(k);
const owner = W(OWNER_KEY), auditor = W(AUDITOR_KEY), writer = W(WRITER_KEY), manager = W(MANAGER_KEY);
const newbie = W(NEWBIE_KEY), stranger = W(STRANGER_KEY), operator = W(OPERATOR_KEY);
const OWNER = owner.address.toLowerCase();

const { rpc, check, refused } = client(URL);
const sleep = (ms) => new Promise((f) => setTimeout(f, ms));

let core, xdom, cdom;
const expiry = () => BigInt(Math.floor(Date.now() / 1000) + 600);
const xdala = (w) => make(w, xdom, 'xdalaPermit', XDALA, { from: w.address, expiry: expiry() }).then((m) => m.permit);
const controlV2 = (w, sessionId, action, stepId = '') => make(w, cdom, 'ControlPermitV2', CONTROL_V2,
  { from: w.address, runner: owner.address, sessionId, action, stepId, expiry: expiry() }).then((m) => m.permit);

async function getSession(w, root) {
  return rpc('xgr_getSession', [{ owner: OWNER, rootPid: root, permit: await xdala(w) }]);
}
async function listed(w, root) {
  const r = await rpc('xgr_listSessions', [{ view: 'sessions', permit: await xdala(w) }]);
  if (!r.result) return { r, row: undefined };
  return { r, row: r.result.sessions.find((s) => s.owner === OWNER && String(s.rootPid) === String(root)) };
}

/* Open GET /ui/events for session root as w; resolve with {status, text} once `until` matches the
 * text read so far, the stream ends, or 10 s pass (bounded). start() runs once the stream is open. */
async function events(w, root, until, start) {
  const permit = JSON.stringify(await xdala(w));
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 10000);
  let text = '', status = 0;
  try {
    // the permit in the Authorization header: never in a URL (logs and history keep URLs)
    const res = await fetch(`${URL}/ui/events?owner=${OWNER}&rootPid=${root}`,
      { signal: ac.signal, headers: { Authorization: 'XDaLaPermit ' + permit } });
    status = res.status;
    if (status !== 200) return { status, text: await res.text() };
    const rd = res.body.getReader();
    let started = false;
    for (;;) {
      const { value, done } = await rd.read();
      if (done) break;
      text += Buffer.from(value).toString();
      if (!started && start) {
        started = true;
        await start();
      }
      if (until(text)) break;
    }
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  return { status, text };
}

/* The newcomer's stream of session 3 (a READ grant): the owner pauses the session once the stream
 * is open; once a pause event arrived the owner revokes the grant, then resumes the session.
 * Resolves with the text before and after the revoke, how the stream ended and the answers. */
async function revokedStream() {
  const permit = JSON.stringify(await xdala(newbie));
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 15000);
  const out = { status: 0, before: '', after: '', ended: false };
  let revoked = false;
  try {
    const res = await fetch(`${URL}/ui/events?owner=${OWNER}&rootPid=3`,
      { signal: ac.signal, headers: { Authorization: 'XDaLaPermit ' + permit } });
    out.status = res.status;
    if (out.status !== 200) return { ...out, before: await res.text() };
    const rd = res.body.getReader();
    let paused = false;
    for (;;) {
      const { value, done } = await rd.read();
      if (done) {
        out.ended = true;
        break;
      }
      const t = Buffer.from(value).toString();
      if (revoked) out.after += t;
      else out.before += t;
      if (!paused) {
        paused = true;
        out.pause = await rpc('xgr_pause', [{ owner: OWNER, rootPid: 3, permit: await controlV2(owner, 3n, 'pause') }]);
      } else if (!revoked && /event: xgr\ndata: .*"rootPid":"3"/.test(out.before)) {
        out.revoke = await rpc('xgr_manageGrants', [{ owner: OWNER, sessionId: '3', entries: [{ grantee: newbie.address,
          rights: 0, expireAt: 0 }], permit: await xdala(owner) }]);
        revoked = true;
        out.resume = await rpc('xgr_resume', [{ owner: OWNER, rootPid: 3, permit: await controlV2(owner, 3n, 'resume') }]);
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  return out;
}

async function grantsOf(root) {
  const all = [];
  let cursor = 0;
  for (let page = 0; page < 20; page++) {
    const r = await rpc('xgr_listGrants', [{ owner: OWNER, sessionId: String(root), limit: 2, cursor,
      permit: await xdala(owner) }]);
    if (!r.result) return { r, all: null };
    all.push(...r.result.items);
    cursor = r.result.nextCursor;
    if (!cursor) return { r, all, pages: page + 1 };
  }
  return { r: null, all: null };
}

async function phase1() {
  const A = auditor.address.toLowerCase();
  // the auditor reads what the branch granted it: the session and its history, marked as a grant
  let r = await getSession(auditor, 1);
  check(r.result && r.result.session.access === 'grant' && r.result.session.rights === 1 &&
    r.result.history.some((h) => h.step === 'K'), 'the auditor reads session 1 and its history (access grant, rights 1)', r);
  check(r.result.audit.some((a) => a.kind === 'grant' && a.detail && a.detail.grantee === A && a.detail.source === 'branch'),
    "the branch's grant is in the session's audit trail", r.result.audit);
  let l = await listed(auditor, 1);
  check(l.row && l.row.access === 'grant' && l.row.rights === 1, "the auditor's listing shows session 1, marked grant", l.r);
  check(!l.r.result.sessions.some((s) => s.owner === OWNER && s.rootPid === '4'), 'nothing ungranted is listed', l.r);
  refused(await getSession(stranger, 1), -32007, 'permit.message.from', 'a stranger cannot read session 1');
  // control: READ is not enough to kill or wake
  refused(await rpc('xgr_kill', [{ owner: OWNER, rootPid: 1, permit: await controlV2(auditor, 1n, 'kill') }]), -32007,
    'permit.message.from', 'the auditor cannot kill session 1');
  refused(await rpc('xgr_wakeUpProcess', [{ processId: '1:2', permit: await controlV2(auditor, 1n, 'wake') }]), -32007,
    'permit.message.from', "the auditor cannot wake session 1's W by pid");
  // the auditor's event stream of session 1 carries W's run, which the writer (WRITE) wakes
  let woke;
  const ev = await events(auditor, 1, (t) => /"step":"W","status":"done"/.test(t), async () => {
    woke = await rpc('xgr_wakeUpProcess', [{ processId: '1:2', payload: { n: 5 }, permit: await controlV2(writer, 1n, 'wake') }]);
  });
  check(woke && woke.result && woke.result.woken === 1 && woke.result.mode === 'pid', 'the writer (WRITE) wakes W by pid', woke);
  check(ev.status === 200 && /"step":"W","status":"done"/.test(ev.text), "the auditor's event stream shows W done", ev);
  r = await getSession(owner, 1);
  check(r.result && r.result.audit.some((a) => a.kind === 'wake' && a.actor === writer.address.toLowerCase()),
    "the writer's wake is in the audit trail with the writer as actor", r.result && r.result.audit);

  // MANAGE: the manager grants a newcomer READ (not WRITE, which it does not hold)
  const until = Math.floor(Date.now() / 1000) + 3600;
  refused(await getSession(newbie, 1), -32007, 'permit.message.from', 'the newcomer cannot read session 1 yet');
  refused(await rpc('xgr_manageGrants', [{ owner: OWNER, sessionId: '1', entries: [{ grantee: newbie.address, rights: 3,
    expireAt: until }], permit: await xdala(manager) }]), -32007, 'entries[0].rights', 'the manager cannot give WRITE');
  r = await rpc('xgr_manageGrants', [{ owner: OWNER, sessionId: '1', scope: 1, entries: [{ grantee: newbie.address, rights: 1,
    expireAt: until, encDEK: '0xdek1' }], permit: await xdala(manager) }]);
  check(r.result && r.result.upserted === 1, 'the manager (MANAGE) grants the newcomer READ', r);
  r = await getSession(newbie, 1);
  check(r.result && r.result.session.access === 'grant', 'the newcomer reads session 1', r);
  // a stranger's manageGrants: refused, nothing stored
  const before = await grantsOf(1);
  check(before.all && before.all.length === 4, 'session 1 has four grants (three from the branch, one managed)', before);
  refused(await rpc('xgr_manageGrants', [{ owner: OWNER, sessionId: '1', entries: [{ grantee: stranger.address, rights: 7,
    expireAt: until }], permit: await xdala(stranger) }]), -32007, 'permit.message.from', "a stranger's manageGrants is refused");
  refused(await rpc('xgr_manageGrants', [{ owner: OWNER, sessionId: '1', entries: [{ grantee: stranger.address, rights: 1,
    expireAt: until }], permit: await xdala(auditor) }]), -32007, 'permit.message.from', "a READ holder's manageGrants is refused");
  const after = await grantsOf(1);
  check(after.all && JSON.stringify(after.all) === JSON.stringify(before.all), 'the refused calls stored nothing', after);
  // paging: four grants, two a page, every one once, the last cursor 0
  const ids = after.all.map((g) => g.id);
  check(after.pages >= 2 && new Set(ids).size === 4 && ids.every((v, i) => !i || v > ids[i - 1]),
    'listGrants pages (limit 2) give each grant once, by id', after);
  const m = after.all.find((g) => g.grantee === newbie.address.toLowerCase());
  check(m && m.encDEK === '0xdek1' && m.rid === '0x1' && m.scope === 1 && m.sessionId === '1' && m.rights === 1,
    'a managed grant comes back with its encDEK as given, rid and sessionId', m);
  const b = after.all.find((g) => g.grantee === A);
  check(b && b.refAddr === '0x00000000000000000000000000000000000000b1' && b.step === 'K' && b.rights === 1,
    "a branch grant names its rule (refAddr) and step", b);
  r = await rpc('xgr_listGrants', [{ permit: await xdala(auditor) }]);
  check(r.result && r.result.items.length === 3 && r.result.items.every((g) => g.grantee === A),
    "the auditor's listGrants shows its own grants only (sessions 1, 2, 3)", r);
  r = await rpc('xgr_listGrants', [{ refAddr: '0x00000000000000000000000000000000000000b1', sessionId: '1', owner: OWNER,
    permit: await xdala(owner) }]);
  check(r.result && r.result.items.length === 3, 'listGrants by refAddr: the branch grants of session 1', r);
  r = await rpc('xgr_getGrantFeePerYear', []);
  check(r.result && r.result.wei === '0x2a', 'xgr_getGrantFeePerYear answers --grant-fee-wei', r);

  // expiry: the owner shortens the auditor's grant; at that instant it stops working
  const soon = Math.floor(Date.now() / 1000) + 2;
  r = await rpc('xgr_manageGrants', [{ owner: OWNER, sessionId: '1', entries: [{ grantee: auditor.address, rights: 1,
    expireAt: soon }], permit: await xdala(owner) }]);
  check(r.result && r.result.upserted === 1, "the owner sets the auditor's grant to expire in 2 s", r);
  while (Date.now() < (soon + 1) * 1000) await sleep(100);   // past the expiry, on any clock rounding
  refused(await getSession(auditor, 1), -32007, 'permit.message.from', 'after its expiry the auditor cannot read session 1');
  l = await listed(auditor, 1);
  check(l.r.result && !l.row, "after its expiry session 1 is not in the auditor's listing", l.r);
  const ev2 = await events(auditor, 1, () => true);
  check(ev2.status === 403 && /permit\.message\.from/.test(ev2.text), "after its expiry the auditor's event stream is refused", ev2);
  r = await getSession(auditor, 2);
  check(r.result && r.result.session.access === 'grant', "the auditor's grant on session 2 still works", r);

  // operators: read and kill another owner's session; a non-operator cannot
  r = await getSession(operator, 2);
  check(r.result && r.result.session.access === 'operator' && r.result.session.rights === 7, 'the operator reads session 2', r);
  r = await rpc('xgr_listSessions', [{ view: 'sessions', permit: await xdala(operator) }]);
  check(r.result && r.result.sessions.filter((s) => s.owner === OWNER && s.access === 'operator').length === 4,
    "the operator's listing shows every owner's sessions, marked operator", r);
  refused(await rpc('xgr_kill', [{ owner: OWNER, rootPid: 3, permit: await controlV2(stranger, 3n, 'kill') }]), -32007,
    'permit.message.from', "a non-operator cannot kill the owner's session 3");
  refused(await rpc('xgr_kill', [{ owner: OWNER, rootPid: 3, permit: await controlV2(writer, 3n, 'kill') }]), -32007,
    'permit.message.from', 'a WRITE grantee cannot kill session 3');
  r = await rpc('xgr_kill', [{ owner: OWNER, rootPid: 2, permit: await controlV2(operator, 2n, 'kill') }]);
  check(r.result && r.result.ok === true, "the operator kills the owner's session 2", r);
  r = await getSession(owner, 2);
  check(r.result && r.result.session.status === 'killed' &&
    r.result.audit.some((a) => a.kind === 'kill' && a.actor === operator.address.toLowerCase()),
  'session 2 is killed and the audit trail names the operator', r.result);
  r = await getSession(owner, 3);
  check(r.result && r.result.session.status === 'running', 'session 3 still runs', r.result && r.result.session);

  // a revoke ends the grantee's open event stream at once
  r = await rpc('xgr_manageGrants', [{ owner: OWNER, sessionId: '3', entries: [{ grantee: newbie.address, rights: 1,
    expireAt: Math.floor(Date.now() / 1000) + 3600 }], permit: await xdala(owner) }]);
  check(r.result && r.result.upserted === 1, 'the owner grants the newcomer READ on session 3', r);
  const rs = await revokedStream();
  check(rs.status === 200 && rs.pause && rs.pause.result && /event: xgr\ndata: .*"rootPid":"3"/.test(rs.before),
    "the newcomer's stream of session 3 receives its events (the owner pauses it)", rs);
  check(rs.revoke && rs.revoke.result && rs.revoke.result.revoked === 1 && rs.resume && rs.resume.result,
    'the owner revokes the grant, then resumes session 3', rs);
  // what the stream sent is judged by the events, not by when they were read (the pause's last
  // events may be read while the revoke is under way): the pause's action event and W paused, none
  // of the resume's (a second action event, W waiting again), then the end
  const all = rs.before + rs.after;
  check(rs.ended && (all.match(/"kind":"action"/g) || []).length === 1 && /"pid":"3:2","step":"W","status":"paused"/.test(all) &&
    !/"status":"waiting"/.test(all) && /event: end\ndata: \{"reason":"access revoked","message":"[^"]*may not read[^"]*"\}\n\n$/.test(all),
  'after the revoke the stream sends no event of session 3 (not the resume): it ends saying why', rs);
  refused(await getSession(newbie, 3), -32007, 'permit.message.from', 'the newcomer cannot read session 3 any more');
  r = await getSession(owner, 3);
  check(r.result && r.result.session.status === 'running' && r.result.audit.some((a) => a.kind === 'resume'),
    'session 3 was resumed (the event the stream did not deliver)', r.result && r.result.session);
  console.log('grants.js phase 1: ok');
}

async function phase2() {
  const g = await grantsOf(1);
  check(g.all && g.all.length === 4, 'after a restart session 1 still has its four grants', g);
  let r = await getSession(newbie, 1);
  check(r.result && r.result.session.access === 'grant', 'after a restart the newcomer reads session 1', r);
  r = await getSession(manager, 3);
  check(r.result && r.result.session.access === 'grant' && r.result.session.rights === 5,
    "after a restart the manager's branch grant on session 3 works", r);
  refused(await getSession(auditor, 1), -32007, 'permit.message.from', "after a restart the auditor's expired grant stays expired");
  console.log('grants.js phase 2: ok');
}

async function main() {
  core = (await rpc('xgr_getCoreAddrs', [])).result;
  check(core && /^0x[0-9a-f]+$/.test(core.chainId), 'xgr_getCoreAddrs gives the chain id', core);
  xdom = { name: 'XDaLa Permit', version: '1', chainId: BigInt(core.chainId) };
  cdom = { name: 'XDaLa ControlPermit', version: '1', chainId: BigInt(core.chainId), verifyingContract: core.precompile };
  if (PHASE === '1') await phase1();
  else await phase2();
}

main().catch((e) => { console.error(e); process.exit(2); });
