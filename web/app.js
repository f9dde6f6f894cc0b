/* app.js — the xgr console: a small single-page app over xgrd's JSON-RPC API (POST /) and its
 * event stream (GET /ui/events, server-sent events). No libraries, nothing loaded from elsewhere.
 *
 * Routes (location.hash):
 *   #/sessions?owner=&registry=&status=&since=&until=&step=&before=   the session list
 *   #/session/<owner>/<rootPid>                                       one session
 *   #/registry?registry=&ostcId=&version=  or  ?hash=                  a registry entry
 *   #/batch  and  #/batch/<id>                                        batch operations: select, preview,
 *                                                                     confirm, watch progress
 * Every call goes to the console's JSON-RPC (POST /ui/rpc): reads use the console's methods
 * (xgr.console.*); actions the API's own (xgr.kill, xgr.pause, xgr.resume, xgr_wakeUpProcess,
 * xgr.batch*, xgr.retry, xgr.fork, xgr.migrateSessions; and xgr.listVersions).
 * Under --auth none they are called directly. In permit mode the user signs in first (Sign-In with
 * Ethereum, EIP-4361: a wallet's personal_sign, or the one-time link `xgr console --key` prints,
 * whose #signin fragment this page exchanges); xgrd then knows the caller by its HttpOnly session
 * cookie, and each call carries the session's CSRF token in the X-XGR-CSRF header.
 */
'use strict';

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));
const main = $('#main');
const state = { info: null, me: null, owner: localStorage.getItem('xgr.owner') || '', es: null, timer: null, view: null };

/* ---- helpers ---------------------------------------------------------------------------------- */

function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function h(html) { const t = document.createElement('template'); t.innerHTML = html.trim(); return t.content; }
function fmtTime(ms) {
  if (!ms || ms <= 0) return '';
  const d = new Date(Number(ms));
  return isNaN(d) ? String(ms) : d.toISOString().replace('T', ' ').replace('Z', '');
}
function fmtDur(ms) {
  ms = Number(ms) || 0;
  if (ms < 1000) return ms + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
  return Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
}
function badge(s) { return `<span class="badge b-${esc(s)}">${esc(s)}</span>`; }
function json(v) { return `<pre class="json">${esc(JSON.stringify(v, null, 2))}</pre>`; }
function toast(msg, bad) {
  const t = $('#toast');
  t.textContent = msg;
  t.className = 'toast' + (bad ? ' bad' : '');
  t.hidden = false;
  clearTimeout(toast.t);
  toast.t = setTimeout(() => { t.hidden = true; }, bad ? 8000 : 3500);
}
function parseQuery(q) { const o = {}; new URLSearchParams(q || '').forEach((v, k) => { o[k] = v; }); return o; }
function query(o) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null && v !== '') p.set(k, v);
  const s = p.toString();
  return s ? '?' + s : '';
}
function debounce(fn, ms) { let t; return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); }; }

/* ---- JSON-RPC ------------------------------------------------------------------------------------- */

let rpcId = 0;
/* POST a JSON body to one of xgrd's console paths; the parsed answer, or an Error (err.status). */
async function post(path, body, headers = {}) {
  const res = await fetch(path, { method: 'POST', headers: Object.assign({ 'Content-Type': 'application/json' }, headers),
    body: JSON.stringify(body), credentials: 'same-origin', cache: 'no-store' });
  let out;
  try { out = await res.json(); } catch (e) { out = null; }
  if (!res.ok) {
    const err = new Error((out && out.error) || `${path}: HTTP ${res.status}`);
    err.status = res.status;
    throw err;
  }
  return out;
}

async function rpc(method, params) {
  const headers = state.me && state.me.csrf ? { 'X-XGR-CSRF': state.me.csrf } : {};
  let body;
  try {
    body = await post('/ui/rpc', { jsonrpc: '2.0', id: ++rpcId, method, params }, headers);
  } catch (e) {
    if (e.status === 401 && state.me && state.me.auth !== 'none') { state.me.address = null; signInPage(e.message); }
    throw e;
  }
  if (body.error) {
    const p = body.error.data && body.error.data.path ? ` (${body.error.data.path})` : '';
    const err = new Error(`${body.error.message}${p}`);
    err.code = body.error.code;
    throw err;
  }
  return body.result;
}

/* ---- signing in (permit mode) ---------------------------------------------------------------------- */
/* Sign-In with Ethereum (EIP-4361): xgrd hands out a nonce with the message's fields (its Host as
 * the domain, uri, chain id, issued at, expiration); the wallet signs the message with personal_sign;
 * xgrd verifies it, uses the nonce up and sets the session cookie. `xgr console --key` signs the
 * same message with a key file and prints a link whose #signin fragment carries message and
 * signature: a fragment is never sent to a server, so they stay out of request logs, and the page
 * removes it from the address bar and history at once. */

const permitMode = () => state.me && state.me.auth !== 'none';

function siweMessage(f, address) {
  return `${f.domain} wants you to sign in with your Ethereum account:\n${address}\n\n${f.statement}\n\n` +
    `URI: ${f.uri}\nVersion: ${f.version}\nChain ID: ${f.chainId}\nNonce: ${f.nonce}\nIssued At: ${f.issuedAt}\n` +
    `Expiration Time: ${f.expirationTime}`;
}

async function signIn(message, signature) {
  const r = await post('/ui/auth/signin', { message, signature });
  state.me = r;
  setOwner('');   // every owner the caller may see
  showWho();
  return r;
}

async function walletSignIn() {
  if (!window.ethereum) throw new Error('no browser wallet here (window.ethereum): sign in with `xgr console --key FILE` instead');
  const accts = await window.ethereum.request({ method: 'eth_requestAccounts' });
  if (!accts || !accts.length) throw new Error('the wallet gave no account');
  const f = await post('/ui/auth/nonce', {});
  const message = siweMessage(f, accts[0]);
  const hex = '0x' + Array.from(new TextEncoder().encode(message), b => b.toString(16).padStart(2, '0')).join('');
  const signature = await window.ethereum.request({ method: 'personal_sign', params: [hex, accts[0]] });
  return signIn(message, signature);
}

function signInPage(why) {
  stopListening();
  showWho();
  main.innerHTML = `
    <h1>Sign in</h1>
    <div class="panel signin">
      <p>This xgrd verifies who you are (<code>--auth permits</code>). Sign in with the Ethereum account whose sessions
      you want to see and act on: xgrd asks for a signature of a Sign-In with Ethereum message (EIP-4361) and answers with
      a session cookie for this page.</p>
      ${why ? `<p class="err" id="signin-why">${esc(why)}</p>` : ''}
      <p><button class="primary" id="wallet-signin">Sign in with a browser wallet</button></p>
      <p>No wallet in this browser? On a machine with your key file run</p>
      <pre class="mono" id="signin-cli">xgr console --key FILE --url ${esc(location.origin)}</pre>
      <p>and open the one-time link it prints (within 5 minutes).</p>
    </div>`;
  $('#wallet-signin').onclick = () => walletSignIn().then(() => { location.hash = '#/sessions'; route(); }, e => toast(e.message, true));
}

async function signOut() {
  try { await post('/ui/auth/signout', {}); } catch (e) { /* the session is gone either way */ }
  state.me = { auth: state.me ? state.me.auth : 'permit', address: null };
  signInPage('Signed out.');
}

function showWho() {
  const m = $('#mode'), so = $('#signout');
  if (!state.me || state.me.auth === 'none') { m.textContent = 'auth none (loopback)'; so.hidden = true; return; }
  m.textContent = state.me.address ? `signed in as ${state.me.address}` : 'not signed in';
  m.id = 'mode';
  so.hidden = !state.me.address;
}

const read = (method, params) => rpc(method, Object.assign({}, params));

/* An action (kill, pause, resume, wake, retry, fork) on a session: under --auth none `from` is the owner;
 * signed in, xgrd knows the caller by the cookie. */
async function act(method, params) {
  const owner = (params.owner || params.runner || '').toLowerCase();
  return rpc(method, permitMode() ? Object.assign({}, params) : Object.assign({ from: owner }, params));
}

/* ---- live events ------------------------------------------------------------------------------------ */

/* The event stream of filter {owner, rootPid}: an EventSource. Signed in, the browser sends the
 * session cookie with it (same origin); nothing secret is in the URL. xgrd ends a stream when the
 * sign-in expires or its lifetime is over; the EventSource then reconnects (and is refused once the
 * session is gone). */
async function listen(filter, onEvent) {
  stopListening();
  const live = on => { const d = $('#live'); if (d) d.classList.toggle('on', on); };
  live(false);
  const es = new EventSource('/ui/events' + query(filter));
  es.addEventListener('xgr', ev => { try { onEvent(JSON.parse(ev.data)); } catch (e) { console.error(e); } });
  es.addEventListener('reset', () => onEvent({ kind: 'reset' }));
  es.onopen = () => live(true);
  es.onerror = () => live(false);
  state.es = es;
}

function stopListening() {
  if (state.es) { state.es.close(); state.es = null; }
}

/* ---- routing ------------------------------------------------------------------------------------------ */

function setOwner(o) {
  state.owner = (o || '').trim().toLowerCase();
  localStorage.setItem('xgr.owner', state.owner);
  $('#owner').value = state.owner;
}

async function route() {
  stopListening();
  const link = takeLink();   // a link opened in a tab that shows the console already
  if (link && permitMode() && !(await useLink(link))) return;
  $('#toast').hidden = true;
  if (permitMode() && !state.me.address) return signInPage();
  const raw = location.hash.replace(/^#/, '') || '/sessions';
  const [path, q] = raw.split('?');
  const parts = path.split('/').filter(Boolean);
  const qs = parseQuery(q);
  $$('nav a').forEach(a => a.classList.toggle('active', a.dataset.nav === (parts[0] === 'session' ? 'sessions' : parts[0])));
  state.view = null;
  try {
    if (parts[0] === 'session' && parts.length >= 3) {
      setOwner(parts[1]);
      await sessionPage(parts[1], parts[2], qs);
    } else if (parts[0] === 'registry') {
      await registryPage(qs);
    } else if (parts[0] === 'batch') {
      await batchPage(parts[1]);
    } else {
      if (qs.owner) setOwner(qs.owner);
      await sessionsPage(qs);
    }
  } catch (e) {
    main.innerHTML = `<div class="panel err">${esc(e.message)}</div>`;
  }
}

/* ---- sessions list -------------------------------------------------------------------------------------- */

async function sessionsPage(qs) {
  const owner = state.owner;
  main.innerHTML = `
    <h1><span id="live" class="live-dot" title="live updates"></span>Sessions</h1>
    <div class="panel">
      <form class="filters" id="filters">
        <label>owner<input name="owner" size="44" value="${esc(owner)}" placeholder="all owners you may see" spellcheck="false"></label>
        <label>registry<input name="registry" value="${esc(qs.registry)}" placeholder="any"></label>
        <label>status<select name="status">
          ${['', 'live', 'running', 'waiting', 'paused', 'completed', 'killed', 'finished'].map(s =>
            `<option value="${s}" ${qs.status === s ? 'selected' : ''}>${s || 'any'}</option>`).join('')}
        </select></label>
        <label>created from<input type="datetime-local" name="since" value="${esc(qs.since)}"></label>
        <label>created until<input type="datetime-local" name="until" value="${esc(qs.until)}"></label>
        <label>at step<input name="step" value="${esc(qs.step)}" placeholder="any" size="10"></label>
        <button class="primary" type="submit">Apply</button>
      </form>
    </div>
    <div class="panel counts" id="counts"></div>
    <div class="panel" id="versions" hidden></div>
    <div class="panel"><div id="list" class="muted">Loading…</div></div>`;
  if (!permitMode()) {   // somewhere to start: the owners with live sessions
    rpc('xgr.console.owners', {}).then(r => {
      if (!r.items.length || !$('#list')) return;
      const links = r.items.map(o => `<a href="#/sessions${query({ owner: o.owner })}">${esc(o.owner)}</a> (${o.liveSessions} live)`);
      $('#list').insertAdjacentHTML('afterend', `<p class="muted" id="owners">Owners with live sessions: ${links.join(' · ')}</p>`);
    }).catch(() => {});
  }
  $('#filters').addEventListener('submit', ev => {
    ev.preventDefault();
    const f = Object.fromEntries(new FormData(ev.target).entries());
    setOwner(f.owner);
    location.hash = '#/sessions' + query(f);
  });
  if (owner) {   // the versions the owner's live sessions run (xgr.listVersions): sessions per bundle, where they wait
  read('xgr.listVersions', qs.registry ? { owner, registry: qs.registry } : { owner }).then(r => {
    const el = $('#versions');
    if (!el || !r.versions.length) return;
    const steps = m => Object.entries(m || {}).map(([k, n]) => `${esc(k)} ×${n}`).join(', ') || '—';
    el.innerHTML = `<h2>Versions of live sessions</h2><table id="versionstable"><tr><th>registry</th><th>orchestration</th>
      <th>bundle</th><th>sessions</th><th>waiting at</th><th>running at</th></tr>
      ${r.versions.map(x => `<tr><td>${esc(x.registry)}${x.ostcId ? '/' + esc(x.ostcId) : ''}</td>
        <td class="mono"><a href="#/registry${query({ hash: x.ostcHash })}">${esc(x.ostcHash.slice(0, 14))}…</a></td>
        <td class="mono" title="${esc(x.bundleHash)}">${esc((x.bundleHash || '(none)').slice(0, 14))}…</td><td>${x.sessions}</td>
        <td>${steps(x.waiting)}</td><td>${steps(x.running)}</td></tr>`).join('')}</table>`;
    el.hidden = false;
  }).catch(() => {});
  }
  const params = { limit: 50 };
  if (owner) params.owner = owner;
  if (qs.beforeOwner) params.beforeOwner = qs.beforeOwner;
  if (qs.registry) params.registry = qs.registry;
  if (qs.status) params.status = qs.status;
  if (qs.step) params.step = qs.step;
  if (qs.since) params.since = Date.parse(qs.since + 'Z');
  if (qs.until) params.until = Date.parse(qs.until + 'Z');
  if (qs.before) params.beforeRootPid = qs.before;
  const load = async () => {
    const t0 = performance.now();
    const r = await read('xgr.console.sessions', params);
    const ms = Math.round(performance.now() - t0);
    const c = r.counts;
    $('#counts').innerHTML = `
      <div><b id="c-live">${c.liveSessions}</b><span>live sessions</span></div>
      <div><b>${c.runningSessions}</b><span>with a step running</span></div>
      <div><b>${c.liveProcesses}</b><span>live processes</span></div>
      <div><b>${c.runningProcesses}</b><span>running processes</span></div>
      <div><b>${r.items.length}</b><span>on this page (${r.scanned} scanned, ${ms} ms)</span></div>`;
    const reg = JSON.parse(localStorage.getItem('xgr.registries') || '[]');
    for (const it of r.items) if (it.registry && !reg.includes(it.registry)) reg.push(it.registry);
    localStorage.setItem('xgr.registries', JSON.stringify(reg.slice(-50)));
    const rows = r.items.map(it => `
      <tr class="click" data-href="#/session/${esc(it.owner)}/${esc(it.rootPid)}">
        <td><a href="#/session/${esc(it.owner)}/${esc(it.rootPid)}">${esc(it.rootPid)}</a></td>
        <td class="mono owner"><a href="#/sessions${query({ owner: it.owner })}" title="only this owner's">${esc(it.owner)}</a></td>
        <td>${esc(it.registry)}</td><td>${esc(it.ostcId)}</td><td>${badge(it.status)}</td>
        <td>${it.live !== undefined ? `${it.live} live · ${it.running} running · ${it.steps} steps` : ''}</td>
        <td>${fmtTime(it.createdAt)}</td><td>${fmtTime(it.finishedAt)}</td>
        <td class="mono muted" title="${esc(it.ostcHash)}">${esc((it.ostcHash || '').slice(0, 10))}…</td></tr>`).join('');
    const newer = qs.before ? `<a href="#/sessions${query(Object.assign({}, qs, { before: '', beforeOwner: '' }))}">⇤ newest</a>` : '';
    const older = r.nextBeforeRootPid ? `<a id="older" href="#/sessions${query(Object.assign({}, qs, { owner, before: r.nextBeforeRootPid, beforeOwner: r.nextOwner || '' }))}">older →</a>` : '';
    const who = owner ? `owner ${owner}` : `all owners you may see (${r.owners.length}${r.ownersPartial ? '+' : ''})`;
    $('#list').className = '';
    $('#list').innerHTML = r.items.length ? `
      <p class="muted" id="list-owners">${esc(who)}</p>
      <table id="sessions"><thead><tr><th>session</th><th>owner</th><th>registry</th><th>orchestration</th><th>status</th><th>now</th>
      <th>created</th><th>finished</th><th>hash</th></tr></thead><tbody>${rows}</tbody></table>
      <div class="pager">${newer} ${older}</div>` : `<p class="muted">No sessions match${r.nextBeforeRootPid
        ? ` among the ${r.scanned} newest looked at; older ones may (a call reads at most 20,000 or for 40 ms)` : ''}.</p>
      <div class="pager">${newer} ${older}</div>`;
    const granted = r.granted || [];   // other owners' sessions granted to the signed-in caller (first page)
    const rightsText = n => ['read', 'write', 'manage'].filter((_, i) => n & (1 << i)).join(', ');
    if (granted.length) $('#list').insertAdjacentHTML('beforeend', `
      <h2>Granted to you</h2>
      <table id="granted"><thead><tr><th>session</th><th>owner</th><th>your rights</th><th>until</th><th>registry</th>
      <th>orchestration</th><th>status</th><th>created</th></tr></thead><tbody>${granted.map(it => `
      <tr class="click" data-href="#/session/${esc(it.owner)}/${esc(it.rootPid)}">
        <td><a href="#/session/${esc(it.owner)}/${esc(it.rootPid)}">${esc(it.rootPid)}</a></td>
        <td class="mono owner">${esc(it.owner)}</td><td class="rights">${esc(rightsText(it.rights))}</td>
        <td>${fmtTime(it.grantExpiresAt)}</td><td>${esc(it.registry)}</td><td>${esc(it.ostcId)}</td>
        <td>${badge(it.status)}</td><td>${fmtTime(it.createdAt)}</td></tr>`).join('')}</tbody></table>`);
    $$('#sessions tr.click, #granted tr.click').forEach(tr => tr.addEventListener('click', ev => {
      if (ev.target.tagName !== 'A') location.hash = tr.dataset.href;
    }));
  };
  await load();
  const again = debounce(() => load().catch(e => toast(e.message, true)), 400);
  listen(owner ? { owner } : {}, ev => { if (ev.kind !== 'proc' || ev.status !== 'running') again(); }).catch(e => toast(e.message, true));
}

/* ---- one session ------------------------------------------------------------------------------------------ */

async function sessionPage(owner, root, qs) {
  const v = state.view = { owner, root, procStep: qs.step || '', procStatus: qs.status || '', procOffset: 0,
    histOffset: 0, selected: qs.pid || '', svgHash: null, feed: [], woken: {} };
  main.innerHTML = `
    <h1><span id="live" class="live-dot" title="live updates"></span>Session <span class="mono">${esc(root)}</span>
      <span class="muted mono" style="font-size:13px">${esc(owner)}</span> <span id="sstatus"></span></h1>
    <div class="panel" id="summary"></div>
    <div class="panel">
      <h2>Actions</h2>
      <div class="actions">
        <button id="a-pause">Pause session</button>
        <button id="a-resume">Resume session</button>
        <button id="a-kill" class="danger">Kill session</button>
        <fieldset><legend>wake</legend>
          <label class="field">mode<select id="w-mode"><option value="pid">PID</option><option value="step">step</option></select></label>
          <label class="field" id="w-pid-l">process<input id="w-pid" size="10" placeholder="${esc(root)}:2"></label>
          <label class="field" id="w-step-l" hidden>step<select id="w-step"></select></label>
          <label class="field">payload (JSON object)<textarea id="w-payload" rows="2" cols="36">{}</textarea></label>
          <button id="a-wake" class="primary">Wake</button>
        </fieldset>
        <fieldset><legend>migrate (checked at its safe point; docs/SEMANTICS.md, "Migration")</legend>
          <label class="field">to<input id="m-to" size="18" placeholder="registry or @bundleHash"></label>
          <label class="field">map (JSON object)<input id="m-map" size="18" value="{}"></label>
          <label class="field"><input type="checkbox" id="m-force"> force</label>
          <button id="a-mcheck">Check</button>
          <button id="a-migrate" class="danger">Migrate</button>
        </fieldset>
      </div>
    </div>
    <div class="row">
      <div class="panel grow" style="flex-basis:620px">
        <h2>Graph</h2>
        <div class="legend">${['waiting', 'running', 'done', 'aborted', 'paused'].map(badge).join(' ')}
          <span>thick edges fired · join nodes show k of n, inbox, fails, outcome</span></div>
        <div class="graph" id="graph"><p class="muted">Drawing…</p></div>
      </div>
      <div class="panel" style="flex:0 1 420px; min-width:320px">
        <h2>Joins</h2><div id="joins" class="joins"></div>
        <h2 style="margin-top:12px">Live events</h2><div id="feed" class="feed muted">waiting for events…</div>
      </div>
    </div>
    <div class="row">
      <div class="panel grow" style="flex-basis:560px">
        <h2>Processes</h2>
        <form class="filters" id="pfilter">
          <label>step<select name="step" id="p-step"><option value="">any</option></select></label>
          <label>status<select name="status">${['', 'waiting', 'running', 'paused', 'done', 'aborted'].map(s =>
            `<option value="${s}" ${v.procStatus === s ? 'selected' : ''}>${s || 'any'}</option>`).join('')}</select></label>
        </form>
        <div id="procs"></div>
      </div>
      <div class="panel grow" style="flex-basis:420px" id="inspector"><h2>Process inspector</h2>
        <p class="muted">Click a process (or a node of the graph) to inspect it.</p></div>
    </div>
    <div class="panel"><h2>Timeline</h2><div id="timeline"></div></div>`;
  $('#w-mode').addEventListener('change', ev => {
    const step = ev.target.value === 'step';
    $('#w-pid-l').hidden = step;
    $('#w-step-l').hidden = !step;
  });
  const done = (what) => (r) => { toast(`${what}: ok` + (r && r.woken !== undefined ? ` (${r.woken} woken)` : '')); refresh(); };
  const fail = (e) => toast(e.message, true);
  const base = { owner, pid: String(root) };
  $('#a-pause').onclick = () => act('xgr.pause', base, 'pause', root).then(done('pause'), fail);
  $('#a-resume').onclick = () => act('xgr.resume', base, 'resume', root).then(done('resume'), fail);
  $('#a-kill').onclick = () => {
    if (!confirm(`Kill session ${root}?`)) return;
    act('xgr.kill', base, 'kill', root).then(done('kill'), fail);
  };
  $('#a-wake').onclick = () => {
    let payload;
    try { payload = JSON.parse($('#w-payload').value || '{}'); } catch (e) { return toast('payload: ' + e.message, true); }
    if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return toast('payload: expected a JSON object', true);
    if ($('#w-mode').value === 'pid') {
      const pid = $('#w-pid').value.trim();
      if (!/^\d+:\d+$/.test(pid)) return toast('process: expected a pid R:I', true);
      act('xgr_wakeUpProcess', { owner, processId: pid, payload }, 'wake', root).then(done('wake ' + pid), fail);
    } else {
      const stepId = $('#w-step').value;
      act('xgr_wakeUpProcess', { runner: owner, sessionId: String(root), stepId, payload }, 'wake', root, stepId)
        .then(done('wake at ' + stepId), fail);
    }
  };
  const migrate = (dryRun) => {
    let map;
    try { map = JSON.parse($('#m-map').value || '{}'); } catch (e) { return toast('map: ' + e.message, true); }
    const to = $('#m-to').value.trim();
    if (!to) return toast('to: expected a registry or @bundleHash', true);
    act('xgr.migrateSessions', { owner, sessions: [String(root)], to, map, force: $('#m-force').checked, dryRun }, 'migrate', root)
      .then(r => {
        const it = r.sessions[0] || {};
        const added = ((it.check || {}).added || []).map(f => f.message);
        toast(`migrate${dryRun ? ' (dry run)' : ''}: ${it.status} — ${it.message}${added.length ? ': ' + added.join('; ') : ''}`,
          !['migrated', 'forced', 'safe'].includes(it.status));
        refresh();
      }, fail);
  };
  $('#a-mcheck').onclick = () => migrate(true);
  $('#a-migrate').onclick = () => { if (confirm(`Migrate session ${root} to ${$('#m-to').value}?`)) migrate(false); };
  $('#pfilter').addEventListener('change', ev => {
    const f = Object.fromEntries(new FormData($('#pfilter')).entries());
    v.procStep = f.step; v.procStatus = f.status; v.procOffset = 0;
    refresh();
  });

  const refresh = async () => {
    if (state.view !== v) return;
    const r = await read('xgr.console.session', { owner, rootPid: String(root), procOffset: v.procOffset, procLimit: 50,
      procStep: v.procStep, procStatus: v.procStatus, histOffset: v.histOffset, histLimit: 50 });
    if (state.view !== v) return;
    v.data = r;
    // "woken ×N" per step: what the store's audit trail says (it survives a reload)
    v.woken = Object.assign({}, r.woken || {});
    renderSession(v, r);
    if (v.selected) inspect(v, v.selected, false);
  };
  v.refresh = refresh;
  await refresh();
  const again = debounce(() => refresh().catch(fail), 250);
  listen({ owner, rootPid: root }, ev => {
    if (ev.kind !== 'reset') pushFeed(v, ev);
    // a wake-up that reached this session (an internal one from another session's rule, or an RPC
    // one) is in its audit trail, committed before the event: the refresh below reads the graph's
    // "woken ×N" from there, so it is the same live and after a reload, and never counted twice
    again();
  }).catch(fail);
}

function pushFeed(v, ev) {
  let line;
  switch (ev.kind) {
    case 'proc': line = `${ev.pid} ${ev.step} → ${ev.status}${ev.valid !== undefined ? (ev.valid ? ' (valid)' : ' (invalid)') : ''}${ev.error ? ' — ' + ev.error : ''}`; break;
    case 'join': line = `join at ${ev.step} (${ev.pid}) decided: ${ev.outcome}`; break;
    case 'step': line = `step of ${ev.pid} executed${ev.ok ? '' : ' with a hard error'}`; break;
    case 'finished': line = `session finished: ${ev.result}`; break;
    case 'idle': line = 'idle: only wake-ups or timers can move it'; break;
    default: line = `${ev.kind}${ev.message ? ': ' + ev.message : ''}${ev.ok === false ? ' (refused)' : ''}`;
  }
  v.feed.unshift(`<div><span class="muted mono">${esc(fmtTime(ev.now).slice(11))}</span> ${esc(line)}</div>`);
  v.feed.length = Math.min(v.feed.length, 200);
  const f = $('#feed');
  if (f) { f.classList.remove('muted'); f.innerHTML = v.feed.join(''); }
}

/* When a waiting process wakes: its timer, or what it waits for instead (waitsFor, docs/RPC.md). */
function wakesText(p) {
  if (p.nextWakeAt) return fmtTime(p.nextWakeAt);
  return { join: 'when its join closes', resume: 'when resumed', wakeUp: 'only on a wake-up' }[p.waitsFor] || '';
}

function renderSession(v, r) {
  const s = r.session;
  $('#sstatus').innerHTML = badge(s.status);
  $('#summary').innerHTML = `<dl class="kv">
    <dt>registry</dt><dd><a href="#/registry${query({ hash: s.ostcHash })}">${esc(s.registry)}</a></dd>
    <dt>orchestration</dt><dd>${esc(s.ostcId)} <span class="mono muted">${esc(s.ostcHash)}</span></dd>
    <dt>status</dt><dd id="status-text">${esc(s.status)}${s.alive ? ' · alive' : ''}${s.paused ? ' · paused' : ''}${s.idle ? ' · idle' : ''}</dd>
    <dt>created</dt><dd>${fmtTime(s.createdAt)}</dd>
    ${s.forkedFrom ? `<dt>forked from</dt><dd id="forked-from"><a href="#/session/${esc(s.forkedFrom.owner)}/${esc(s.forkedFrom.rootPid)}"
      >session ${esc(s.forkedFrom.rootPid)}</a> at <span class="mono">${esc(s.forkedFrom.rootPid)}:${esc(s.forkedFrom.iter)}</span>
      (step ${esc(s.forkedFrom.step)})</dd>` : ''}
    ${s.status === 'running' || s.status === 'paused' ? `<dt>next wake</dt><dd id="next-wake">${s.nextWakeAt ? fmtTime(s.nextWakeAt) : (s.paused ? 'when resumed' : 'no timer set')}</dd>` : ''}
    ${s.finishedAt ? `<dt>finished</dt><dd>${fmtTime(s.finishedAt)} (${fmtDur(s.finishedAt - s.createdAt)})</dd>` : ''}
    <dt>processes</dt><dd>${Object.entries(r.steps).map(([k, c]) =>
      `${esc(k)}: ${['waiting', 'running', 'paused', 'done', 'aborted'].filter(x => c[x]).map(x => c[x] + ' ' + x).join(', ') || '—'}`).join(' · ')}</dd>
  </dl>`;
  const steps = r.stepOrder || Object.keys(r.steps);
  const ws = $('#w-step'), keep = ws.value;
  ws.innerHTML = steps.map(st => `<option ${st === keep ? 'selected' : ''}>${esc(st)}</option>`).join('');
  const ps = $('#p-step');
  ps.innerHTML = '<option value="">any</option>' + steps.map(st => `<option ${st === v.procStep ? 'selected' : ''}>${esc(st)}</option>`).join('');
  drawGraph(v, r);
  // joins
  const joins = Object.values(r.joins);
  $('#joins').innerHTML = joins.length ? joins.map(j => `
    <div class="join-card" data-node="${esc(j.node)}">
      <h3>join ${esc(j.target)} <span class="muted">declared by ${esc(j.declaredBy)}</span> ${badge(j.outcome)}</h3>
      <div><b>${j.have} of ${j.k}</b> needed (n = ${j.n}, ${esc(j.policy)})${j.instances > 1 ? ` · instance ${j.instances}` : ''}</div>
      <div>inbox: ${j.arrived.length ? j.arrived.map(esc).join(', ') : '—'}</div>
      <div>failed: ${j.failed.length ? j.failed.map(esc).join(', ') : '—'}</div>
      <div>${j.closed ? 'never arrived' : 'pending'}: ${j.pending.length ? j.pending.map(esc).join(', ') : '—'}</div>
      <div>${j.closed ? 'closed' : 'open'} · ${j.satisfiable ? (j.closed ? 'satisfied' : 'can still be satisfied') : 'can no longer be satisfied'}</div>
      <div><a href="javascript:void 0" data-pid="${esc(j.pid)}">target ${esc(j.pid)}</a> (${esc(j.targetStatus)})</div>
    </div>`).join('') : '<p class="muted">No join has opened.</p>';
  $$('#joins a[data-pid]').forEach(a => a.onclick = () => inspect(v, a.dataset.pid, true));
  // processes
  const p = r.processes;
  $('#procs').innerHTML = `<table id="proctable"><thead><tr><th>pid</th><th>step</th><th>status</th><th>valid</th><th>started</th>
    <th>finished</th><th>wakes at</th><th>error</th></tr></thead><tbody>${p.items.map(it => `
    <tr class="click ${it.pid === v.selected ? 'sel' : ''}" data-pid="${esc(it.pid)}"><td class="mono">${esc(it.pid)}</td><td>${esc(it.step)}</td>
    <td>${badge(it.status)}</td><td>${it.valid === null ? '' : it.valid}</td><td>${fmtTime(it.startedAt)}</td>
    <td>${fmtTime(it.finishedAt)}</td><td>${wakesText(it)}</td>
    <td class="err">${esc(it.error || it.abortReason || '')}</td></tr>`).join('')}</tbody></table>
    <div class="pager"><button class="small" id="p-prev" ${v.procOffset ? '' : 'disabled'}>← prev</button>
    <span class="muted">${p.total ? `${p.offset + 1}–${p.offset + p.items.length} of ${p.total}` : 'none'}</span>
    <button class="small" id="p-next" ${p.offset + p.items.length < p.total ? '' : 'disabled'}>next →</button></div>`;
  $$('#proctable tr.click').forEach(tr => tr.onclick = () => inspect(v, tr.dataset.pid, true));
  $('#p-prev').onclick = () => { v.procOffset = Math.max(0, v.procOffset - 50); v.refresh(); };
  $('#p-next').onclick = () => { v.procOffset += 50; v.refresh(); };
  // timeline
  const hs = r.history;
  $('#timeline').innerHTML = `<table id="history"><thead><tr><th>began</th><th>pid</th><th>step</th><th>status</th><th>valid</th>
    <th>duration</th><th>error</th></tr></thead><tbody>${hs.items.map(it => it.status === 'wake_refused' ? refusedRow(it) :
    it.status === 'audit' ? auditRow(it) : `
    <tr class="click" data-pid="${esc(it.pid)}"><td class="mono">${fmtTime(it.at)}</td><td class="mono">${esc(it.pid)}</td><td>${esc(it.step)}</td>
    <td>${badge(it.status)}</td><td>${it.valid === null ? '' : it.valid}</td><td>${fmtDur(it.durationMs)}</td>
    <td class="err">${esc(it.error || '')}</td></tr>${(it.apiCalls || []).map(a => `
    <tr class="api"><td></td><td colspan="6" class="mono">↳ API call <b>${esc(a.name)}</b> ${esc(a.url || '')}
      → ${a.status !== undefined && a.status !== null ? esc(a.status) : '—'} in ${fmtDur(a.ms)}${a.error ? ` <span class="err">${esc(a.error)}</span>` : ''}</td></tr>`).join('')}`).join('')}</tbody></table>
    <div class="pager"><button class="small" id="h-prev" ${v.histOffset ? '' : 'disabled'}>← newer</button>
    <span class="muted">${hs.total ? `${hs.offset + 1}–${hs.offset + hs.items.length} of ${hs.total} executions (newest first)` : 'no step has run'}</span>
    <button class="small" id="h-next" ${hs.offset + hs.items.length < hs.total ? '' : 'disabled'}>older →</button></div>`;
  $$('#history tr.click').forEach(tr => tr.onclick = () => inspect(v, tr.dataset.pid, true));
  $('#h-prev').onclick = () => { v.histOffset = Math.max(0, v.histOffset - 50); v.refresh(); };
  $('#h-next').onclick = () => { v.histOffset += 50; v.refresh(); };
}

/* A timeline row of the audit trail (status audit, the entry under audit): a control action or a
 * wake-up applied to the session — what, who, through which node, when (docs/RPC.md "audit"). */
function auditRow(it) {
  const a = it.audit || {}, d = a.detail || {};
  const what = { kill: 'killed', pause: 'paused', resume: 'resumed', wake: 'woken', 'wake-internal': 'woken by a wake-up',
    'wake-refused': 'wake-up refused', retry: `retried as process ${d.newIter}`,
    fork: d.forkedTo ? `forked into session ${d.forkedTo.rootPid}` : 'forked',
    forked: d.from ? `forked from ${d.from.rootPid}:${d.from.iter}` : 'forked from another session' }[a.kind] || a.kind;
  const target = d.iter ? `process ${esc(d.iter)}` : d.step ? `step ${esc(d.step)}` : 'session';
  const from = d.from ? ` from <span class="mono">${esc(d.from.owner)}/${esc(d.from.rootPid)}</span>${d.from.step ? ` (step ${esc(d.from.step)})` : ''}` : '';
  const keys = d.keys && d.keys.length ? ` · payload keys ${d.keys.map(esc).join(', ')}` : '';
  return `
    <tr class="audit"><td class="mono">${fmtTime(a.at)}</td><td class="mono">${d.iter ? esc(d.iter) : ''}</td><td>${esc(d.step || '')}</td>
    <td><span class="badge">${esc(a.kind)}</span></td><td></td><td></td>
    <td class="audit-text">${esc(what)} (${target}) by <span class="mono">${esc(a.actor)}</span> via ${esc(a.node)}${from}${keys}
      ${a.permitDigest ? ` · permit <span class="mono" title="${esc(a.permitDigest)}">${esc(a.permitDigest.slice(0, 10))}…</span>` : ''}
      ${d.reason ? ` · <span class="err">${esc(d.reason)}</span>` : ''}</td></tr>`;
}

/* A timeline row of an internal wake-up this session sent that was refused (status wake_refused,
 * the refusal under wakeUp): when it was refused, the process and step that sent it, to whom and why.
 * A sender the store did not record has the pid "R" and no step (no process to inspect). */
function refusedRow(it) {
  const w = it.wakeUp || {};
  const sender = String(it.pid).includes(':');
  return `
    <tr class="refused${sender ? ' click' : ''}" data-pid="${esc(it.pid)}"><td class="mono">${fmtTime(w.refusedAt || it.at)}</td>
    <td class="mono">${esc(it.pid)}</td><td>${esc(it.step || '')}</td><td>${badge(it.status)}</td><td></td><td></td>
    <td class="refusal">wake-up sent by ${sender ? `${esc(it.pid)}${it.step ? ` (step ${esc(it.step)})` : ''}` : 'this session'}
      to <span class="mono">${esc(w.runner)}/${esc(w.sessionId)}</span> step <b>${esc(w.stepId)}</b>
      refused: <span class="err">${esc(w.reason || '')}</span></td></tr>`;
}

/* The orchestration's SVG (one fetch per hash) with the session's live state laid over it. */
async function drawGraph(v, r) {
  const g = $('#graph');
  const hash = r.session.ostcHash;
  if (v.svgHash !== hash) {
    v.svgHash = hash;
    const res = await fetch('/ui/graph.svg?hash=' + encodeURIComponent(hash));
    if (!res.ok) { g.innerHTML = `<p class="err">${esc(await res.text())}</p>`; return; }
    const doc = new DOMParser().parseFromString(await res.text(), 'image/svg+xml');
    g.innerHTML = '';
    const el = document.importNode(doc.documentElement, true);
    // room under the last rank for the live labels
    const vb = (el.getAttribute('viewBox') || '').split(/\s+/).map(Number);
    if (vb.length === 4 && vb.every(isFinite)) {
      vb[3] += 44;
      el.setAttribute('viewBox', vb.join(' '));
      el.setAttribute('height', (parseFloat(el.getAttribute('height')) + 44) + 'pt');
    }
    g.appendChild(el);
    $$('g.node', g).forEach(n => n.addEventListener('click', () => nodeClicked(v, n.id)));
  }
  const svg = $('svg', g);
  if (!svg) return;
  $$('.live', svg).forEach(e => e.remove());
  $$('g.node', svg).forEach(n => n.classList.remove('woken', 'st-waiting', 'st-running', 'st-done', 'st-aborted', 'st-paused',
    'jn-open', 'jn-satisfied', 'jn-unfulfillable'));
  $$('g.edge', svg).forEach(e => e.classList.toggle('fired', !!r.fired[e.id]));
  for (const [step, c] of Object.entries(r.steps)) {
    const n = svg.getElementById('step-' + step);
    if (!n) continue;
    const st = c.running ? 'running' : c.waiting ? 'waiting' : c.paused ? 'paused' : c.aborted && !c.done ? 'aborted' : c.done ? 'done' : '';
    if (st) n.classList.add('st-' + st);
    const parts = ['waiting', 'running', 'paused', 'done', 'aborted'].filter(x => c[x]).map(x => `${c[x]} ${x}`);
    n.dataset.state = parts.join(', ');
    const lines = parts.length ? [parts.join(' · ')] : [];
    if (v.woken[step]) { n.classList.add('woken'); lines.push(`woken ×${v.woken[step]}`); }
    if (lines.length) addLabel(svg, n, lines);
  }
  for (const j of Object.values(r.joins)) {
    const n = svg.getElementById(j.node);
    if (!n) continue;
    n.classList.add('jn-' + j.outcome);
    const lines = [`${j.have}/${j.k} pieces · ${j.outcome}`,
      `inbox: ${j.arrived.join(', ') || '—'}${j.failed.length ? ' · failed: ' + j.failed.join(', ') : ''}`,
      j.closed ? `closed${j.satisfiable ? '' : ' · unsatisfiable'}` : (j.satisfiable ? 'can still be satisfied' : 'can no longer be satisfied')];
    addLabel(svg, n, lines, true);
  }
}

/* Write lines under node n (a white box, so edges behind stay readable). */
function addLabel(svg, n, lines, strong) {
  const shape = n.querySelector('path, polygon, ellipse');
  if (!shape) return;
  const b = shape.getBBox();
  const NS = 'http://www.w3.org/2000/svg';
  const grp = document.createElementNS(NS, 'g');
  grp.setAttribute('class', 'live live-label');
  const text = document.createElementNS(NS, 'text');
  text.setAttribute('class', 'live');
  text.setAttribute('text-anchor', 'middle');
  lines.forEach((l, i) => {
    const t = document.createElementNS(NS, 'tspan');
    if (l.startsWith('woken')) t.setAttribute('class', 'live woke');
    t.setAttribute('x', b.x + b.width / 2);
    t.setAttribute('y', b.y + b.height + 12 + i * 13);
    if (strong && i === 0) t.setAttribute('font-weight', 'bold');
    t.textContent = l;
    text.appendChild(t);
  });
  grp.appendChild(text);
  n.appendChild(grp);
  const tb = text.getBBox();
  const bg = document.createElementNS(NS, 'rect');
  bg.setAttribute('class', 'live live-bg');
  bg.setAttribute('x', tb.x - 3); bg.setAttribute('y', tb.y - 1);
  bg.setAttribute('width', tb.width + 6); bg.setAttribute('height', tb.height + 2);
  bg.setAttribute('rx', 3);
  grp.insertBefore(bg, text);
}

function nodeClicked(v, id) {
  if (id.startsWith('step-')) {
    v.procStep = id.slice(5);
    v.procOffset = 0;
    v.refresh();
    $$('#graph g.node').forEach(n => n.classList.toggle('selected', n.id === id));
  } else if (id.startsWith('join-') && v.data) {
    const j = v.data.joins[id];
    if (j) inspect(v, j.pid, true);
  }
}

async function inspect(v, pid, scroll) {
  v.selected = pid;
  $$('#proctable tr').forEach(tr => tr.classList.toggle('sel', tr.dataset.pid === pid));
  const box = $('#inspector');
  let r;
  try { r = await read('xgr.console.process', { owner: v.owner, pid }); } catch (e) {
    box.innerHTML = `<h2>Process inspector</h2><p class="err">${esc(e.message)}</p>`;
    return;
  }
  if (state.view !== v) return;
  const p = r.process;
  const j = p.joinState;
  box.innerHTML = `<h2>Process <span class="mono" id="insp-pid">${esc(p.pid)}</span> ${badge(p.status)}</h2>
    <dl class="kv">
      <dt>step</dt><dd>${esc(p.step)}</dd>
      <dt>parent</dt><dd class="mono">${esc(p.parentPid || '—')}</dd>
      <dt>valid</dt><dd>${p.valid === null ? '—' : p.valid}</dd>
      <dt>created</dt><dd>${fmtTime(p.createdAt)}</dd>
      <dt>started</dt><dd>${fmtTime(p.startedAt) || '—'}</dd>
      <dt>finished</dt><dd>${fmtTime(p.finishedAt) || '—'}</dd>
      ${p.status === 'waiting' || p.status === 'paused' ? `<dt>wakes at</dt><dd>${wakesText(p)}</dd>` : ''}
      ${p.error || p.abortReason ? `<dt>error</dt><dd class="err" id="insp-error">${esc(p.error || '')} ${esc(p.abortReason || '')}</dd>` : ''}
      <dt>children</dt><dd class="mono">${p.children.map(esc).join(' ') || '—'}</dd>
    </dl>
    ${p.status === 'waiting' || p.status === 'paused' ? `<p><button class="small" id="insp-wake">Wake this process…</button>
      <button class="small" id="insp-pause">${p.status === 'paused' ? 'Resume' : 'Pause'} this process</button></p>` : ''}
    ${p.status === 'aborted' && (p.abortReason === 'error' || p.abortReason === 'killed') ? `<p><button class="small" id="insp-retry"
      title="run its step again as a new process of this session, in the same join scope (xgr.retry)">Retry this process…</button></p>` : ''}
    ${p.history.length ? `<p><button class="small" id="insp-fork"
      title="start a new session at this step with its input payload (xgr.fork)">Fork a new session from this step…</button></p>` : ''}
    <h2>Payload</h2>${json(p.payload)}
    ${j ? `<h2>Join inbox (${j.have} of ${j.k}, ${esc(j.outcome)})</h2>${json(j.inbox)}
      <div>failed: ${j.failed.map(esc).join(', ') || '—'} · pending: ${j.pending.map(esc).join(', ') || '—'}</div>` : ''}
    <h2><code>__wakeUp</code> allow list</h2>${p.wakeUp ? `<div id="insp-wakeup">${json(p.wakeUp)}</div>` : '<p class="muted">none (only the owner may wake it)</p>'}
    <h2>Runs</h2>${p.history.length ? p.history.map(hh => `<div>${fmtTime(hh.at)} · ${badge(hh.status)} ${hh.valid === null ? '' : hh.valid ? 'valid' : 'invalid'}
      · ${fmtDur(hh.durationMs)}${hh.error ? ` · <span class="err">${esc(hh.error)}</span>` : ''}</div>`).join('') : '<p class="muted">not run yet</p>'}`;
  const w = $('#insp-wake');
  if (w) w.onclick = () => {
    $('#w-mode').value = 'pid';
    $('#w-mode').dispatchEvent(new Event('change'));
    $('#w-pid').value = p.pid;
    $('#w-payload').focus();
  };
  /* retry / fork: an optional payload (empty: the recorded one) asked for, then the API's method */
  const askPayload = what => {
    const t = window.prompt(`${what}: payload as JSON (empty: the recorded one)`, '');
    if (t === null) return undefined;
    if (!t.trim()) return null;
    try { return JSON.parse(t); } catch (e) { toast('not JSON: ' + e.message, true); return undefined; }
  };
  const rt = $('#insp-retry');
  if (rt) rt.onclick = () => {
    const pl = askPayload('Retry ' + p.pid);
    if (pl === undefined) return;
    act('xgr.retry', Object.assign({ owner: v.owner, pid: p.pid }, pl ? { payload: pl } : {}), 'retry', v.root)
      .then(r => { toast(`retried ${p.pid} as ${r.newPid}`); v.refresh(); }, e => toast(e.message, true));
  };
  const fk = $('#insp-fork');
  if (fk) fk.onclick = () => {
    const pl = askPayload('Fork from ' + p.pid);
    if (pl === undefined) return;
    act('xgr.fork', Object.assign({ owner: v.owner, sessionId: String(v.root), pid: p.pid }, pl ? { payload: pl } : {}), 'fork', v.root)
      .then(r => { toast(`forked session ${r.rootPid}`); location.hash = `#/session/${v.owner}/${r.rootPid}`; },
        e => toast(e.message, true));
  };
  const ps = $('#insp-pause');
  if (ps) ps.onclick = () => act(p.status === 'paused' ? 'xgr.resume' : 'xgr.pause', { owner: v.owner, pid: p.pid },
    p.status === 'paused' ? 'resume' : 'pause', v.root).then(() => { toast('ok'); v.refresh(); }, e => toast(e.message, true));
  if (scroll) box.scrollIntoView({ block: 'nearest' });
}

/* ---- registry ---------------------------------------------------------------------------------------------- */

async function registryPage(qs) {
  const known = JSON.parse(localStorage.getItem('xgr.registries') || '[]');
  main.innerHTML = `<h1>Registry</h1>
    <div class="panel"><form class="filters" id="rform">
      <label>registry (XRC-729 address or name)<input name="registry" size="44" value="${esc(qs.registry)}" list="known"></label>
      <datalist id="known">${known.map(k => `<option value="${esc(k)}">`).join('')}</datalist>
      <label>orchestration id<input name="ostcId" value="${esc(qs.ostcId)}" placeholder="current"></label>
      <label>version<input name="version" size="5" value="${esc(qs.version)}" placeholder="latest"></label>
      <label>or hash<input name="hash" size="40" value="${esc(qs.hash)}" placeholder="0x…"></label>
      <button class="primary">Show</button></form>
      ${known.length ? `<p class="muted">Seen in sessions: ${known.map(k => `<a href="#/registry${query({ registry: k })}">${esc(k)}</a>`).join(' · ')}</p>` : ''}
    </div><div id="entry"></div>`;
  $('#rform').addEventListener('submit', ev => {
    ev.preventDefault();
    location.hash = '#/registry' + query(Object.fromEntries(new FormData(ev.target).entries()));
  });
  if (!qs.registry && !qs.hash) return;
  const params = {};
  for (const k of ['registry', 'ostcId', 'hash']) if (qs[k]) params[k] = qs[k];
  if (qs.version) params.version = Number(qs.version);
  const r = await read('xgr.console.registry', params);
  const errs = r.findings.filter(f => f.severity === 'error').length;
  $('#entry').innerHTML = `
    <div class="panel"><h2>${esc(r.id)} · version ${r.version} of ${r.latest}</h2><dl class="kv">
      <dt>hash</dt><dd class="mono">${esc(r.hash)}</dd><dt>owner</dt><dd class="mono">${esc(r.owner || '—')}</dd>
      <dt>registered</dt><dd>${fmtTime(r.registeredAt)}</dd>
      <dt>check</dt><dd id="check-result">${errs ? `<span class="err">${errs} error(s)</span>` : 'passes'}${r.findings.length - errs ? `, ${r.findings.length - errs} other finding(s)` : ''}</dd></dl></div>
    <div class="row">
      <div class="panel grow" style="flex-basis:560px"><h2>Graph</h2><div class="graph static" id="rgraph"></div></div>
      <div class="panel grow" style="flex-basis:420px">
        <h2>Versions</h2><table><thead><tr><th>version</th><th>hash</th><th>owner</th><th>registered</th></tr></thead><tbody>
        ${r.versions.map(x => `<tr><td><a href="#/registry${query({ hash: x.hash })}">${x.version}</a></td><td class="mono">${esc(x.hash.slice(0, 18))}…</td>
          <td class="mono">${esc(x.owner.slice(0, 12))}</td><td>${fmtTime(x.registeredAt)}</td></tr>`).join('')}</tbody></table>
        <h2 style="margin-top:12px"><code>xgr check</code> findings</h2>
        <ul id="findings">${r.findings.map(f => `<li class="find-${f.severity}"><b>${f.severity}</b> <code>${esc(f.path)}</code> ${esc(f.message)}</li>`).join('') || '<li class="muted">none</li>'}</ul>
      </div>
    </div>
    <div class="panel"><h2>Steps and rules</h2><table id="rules"><thead><tr><th>step</th><th>rule</th><th>versions (hash, owner)</th></tr></thead><tbody>
      ${r.steps.map(s => `<tr><td>${esc(s.step)}</td><td class="mono">${esc(s.rule)}</td><td>${s.ruleVersions.length ? s.ruleVersions.map(x =>
        `v${x.version} <span class="mono">${esc(x.hash.slice(0, 14))}…</span> <span class="mono muted">${esc(x.owner.slice(0, 10))}</span>`).join('<br>') : '<span class="err">not registered</span>'}</td></tr>`).join('')}
    </tbody></table></div>
    <div class="panel"><h2>Document</h2>${json(r.orchestration)}</div>`;
  const res = await fetch(r.graph);
  const doc = new DOMParser().parseFromString(await res.text(), 'image/svg+xml');
  $('#rgraph').appendChild(document.importNode(doc.documentElement, true));
}

/* ---- start ---------------------------------------------------------------------------------------------------- */

/* A one-time link of `xgr console --key`: #signin&m=MESSAGE&s=SIGNATURE. Taken out of the address
 * bar and the history at once; {m, s}, or null when the address is no such link. */
function takeLink() {
  if (!location.hash.startsWith('#signin')) return null;
  const f = new URLSearchParams(location.hash.slice(1));
  history.replaceState(null, '', location.pathname + location.search + '#/sessions');
  return { m: f.get('m') || '', s: f.get('s') || '' };
}

/* Exchange a link for the session cookie; false (and the sign-in page says why) when refused. */
async function useLink(link) {
  try {
    await signIn(link.m, link.s);
    toast('signed in as ' + state.me.address);
    return true;
  } catch (e) {
    showWho();
    signInPage('The sign-in link was refused: ' + e.message);
    return false;
  }
}

/* ---- batch operations --------------------------------------------------------------------------------- */
/* Select sessions with the filters, preview the count and a sample (xgr.batchPreview), confirm, then
 * watch the operation's progress (xgr.batchGet every half second) with a cancel button. Under permits
 * the preview and the reads carry the reader's xdalaPermit; start and cancel a fresh one each (xgrd
 * uses it up). */

async function batchCall(method, params) {
  if (!permitMode()) return rpc(method, Object.assign(state.owner ? { from: state.owner } : {}, params));
  return rpc(method, params);   // signed in: the cookie names the caller
}

function batchSelection(f) {
  const sel = {};
  if (f.owner) sel.owner = f.owner.trim().toLowerCase();
  for (const k of ['registry', 'ostcId', 'hash', 'step']) if (f[k]) sel[k] = f[k].trim();
  if (f.status) sel.status = f.status;
  if (f.createdFrom) sel.createdFrom = Date.parse(f.createdFrom + 'Z');
  if (f.createdTo) sel.createdTo = Date.parse(f.createdTo + 'Z');
  if (f.rootFrom) sel.rootFrom = f.rootFrom.trim();
  if (f.rootTo) sel.rootTo = f.rootTo.trim();
  return sel;
}

function opLine(op) {
  const handled = op.done + op.failed + op.skipped;
  return `<tr><td><a href="#/batch/${esc(op.id)}" class="mono">${esc(op.id.slice(0, 12))}…</a></td><td>${esc(op.action)}</td>
    <td>${badge(op.state)}</td><td>${handled} / ${op.total}</td><td>${fmtTime(op.createdAt)}</td></tr>`;
}

async function batchPage(id) {
  main.innerHTML = `
    <h1>Batch operations</h1>
    <div class="panel">
      <form class="filters" id="bfilters">
        <label>owner<input name="owner" size="44" value="${esc(state.owner)}" placeholder="0x…" spellcheck="false"></label>
        <label>registry<input name="registry" placeholder="any" size="10"></label>
        <label>orchestration<input name="ostcId" placeholder="any" size="10"></label>
        <label>hash<input name="hash" placeholder="0x… any" size="12"></label>
        <label>status<select name="status">${['', 'running', 'waiting', 'paused'].map(s =>
          `<option value="${s}">${s || 'any live'}</option>`).join('')}</select></label>
        <label>at step<input name="step" placeholder="any" size="10"></label>
        <label>created from<input type="datetime-local" name="createdFrom"></label>
        <label>created until<input type="datetime-local" name="createdTo"></label>
        <label>rootPid from<input name="rootFrom" size="6"></label>
        <label>to<input name="rootTo" size="6"></label>
        <label>action<select name="action">${['kill', 'pause', 'resume', 'wake'].map(a =>
          `<option value="${a}">${a}</option>`).join('')}</select></label>
        <label>wake step<input name="stepId" placeholder="for wake" size="10"></label>
        <label>payload<input name="payload" placeholder='{"…": …} for wake' size="16"></label>
        <button class="primary" type="submit" id="bpreview">Preview</button>
      </form>
    </div>
    <div class="panel" id="bresult" hidden></div>
    <div class="panel" id="bop" hidden></div>
    <div class="panel"><h2>Your operations</h2><div id="blist" class="muted">Loading…</div></div>`;
  const loadList = async () => {
    if (!state.owner && !permitMode()) { $('#blist').textContent = 'Enter an owner address.'; return; }
    const r = await batchCall('xgr.batchList', { limit: 20 });
    $('#blist').className = '';
    $('#blist').innerHTML = r.operations.length ? `<table id="bops"><thead><tr><th>operation</th><th>action</th><th>state</th>
      <th>handled</th><th>started</th></tr></thead><tbody>${r.operations.map(opLine).join('')}</tbody></table>`
      : '<p class="muted">None yet.</p>';
  };
  const watch = async (opId) => {
    const box = $('#bop');
    box.hidden = false;
    for (;;) {
      if (!$('#bop') || state.view !== 'batch:' + opId) return;
      let op;
      try { op = await batchCall('xgr.batchGet', { id: opId }); } catch (e) { box.innerHTML = `<div class="err">${esc(e.message)}</div>`; return; }
      const handled = op.done + op.failed + op.skipped;
      box.innerHTML = `<h2>Operation <span class="mono">${esc(op.id)}</span></h2>
        <p>${esc(op.action)} · ${badge(op.state)} · <span id="bprog-text">${handled} / ${op.total}</span> handled
        (${op.done} done, ${op.failed} failed, ${op.skipped} skipped)</p>
        <progress id="bprog" max="${Math.max(op.total, handled, 1)}" value="${handled}"></progress>
        ${op.state === 'running' ? '<button id="bcancel" class="small">Cancel</button>' : ''}
        ${op.error ? `<div class="err">${esc(op.error)}</div>` : ''}`;
      box.dataset.state = op.state;
      const c = $('#bcancel');
      if (c) c.onclick = () => batchCall('xgr.batchCancel', { id: opId }).then(() => toast('cancelled'), e => toast(e.message, true));
      if (op.state !== 'running') { loadList().catch(() => {}); return; }
      await new Promise(r => setTimeout(r, 500));
    }
  };
  $('#bfilters').addEventListener('submit', async ev => {
    ev.preventDefault();
    const f = Object.fromEntries(new FormData(ev.target).entries());
    if (f.owner) setOwner(f.owner);
    const sel = batchSelection(f);
    const box = $('#bresult');
    box.hidden = false;
    try {
      const p = await batchCall('xgr.batchPreview', { selection: sel, sample: 10 });
      const sample = p.sample.map(s => `<li><a href="#/session/${esc(s.owner)}/${esc(s.rootPid)}">${esc(s.owner)}/${esc(s.rootPid)}</a> ${badge(s.status)}</li>`).join('');
      box.innerHTML = `<p><b id="bcount">${p.count}</b> session(s) selected${p.count > p.sample.length ? ` (the first ${p.sample.length} below)` : ''}.</p>
        <ul class="sample">${sample}</ul>
        ${p.count ? `<button class="primary" id="bconfirm">${esc(f.action)} ${p.count} session(s)</button>` : ''}`;
      const b = $('#bconfirm');
      if (b) b.onclick = async () => {
        b.disabled = true;
        const params = { selection: sel, action: f.action };
        if (f.action === 'wake') {
          params.stepId = f.stepId || f.step;
          if (f.payload) params.payload = JSON.parse(f.payload);
        }
        try {
          const r = await batchCall('xgr.batchStart', params);
          state.view = 'batch:' + r.id;
          history.replaceState(null, '', '#/batch/' + r.id);
          toast(`started ${f.action} of ${r.total} session(s)`);
          watch(r.id);
        } catch (e) { b.disabled = false; toast(e.message, true); }
      };
    } catch (e) {
      box.innerHTML = `<div class="err">${esc(e.message)}</div>`;
    }
  });
  loadList().catch(e => { $('#blist').innerHTML = `<div class="err">${esc(e.message)}</div>`; });
  if (id) {
    state.view = 'batch:' + id;
    watch(id);
  }
}

async function start() {
  setOwner(state.owner);
  $('#owner').addEventListener('change', ev => {
    setOwner(ev.target.value);
    if (!location.hash.startsWith('#/registry')) location.hash = '#/sessions' + query({ owner: state.owner });
  });
  $('#signout').onclick = () => signOut();
  window.addEventListener('hashchange', route);
  const link = takeLink();
  try {
    state.me = await post('/ui/auth/me', {});
  } catch (e) {
    state.me = { auth: 'none' };
  }
  if (link && permitMode() && !(await useLink(link))) return;
  if (permitMode() && state.me.address && state.owner !== state.me.address) setOwner('');
  showWho();
  try { state.info = await rpc('xgr.console.info', {}); } catch (e) { state.info = { auth: state.me.auth }; }
  await route();
}
start();
