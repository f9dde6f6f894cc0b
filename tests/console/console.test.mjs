// console.test.mjs XGR XGRD OUTDIR CHROMIUM — the xgr console in a real browser.
//
// Starts xgrd (--auth none, SQLite store in a temporary directory) on 127.0.0.1, registers the
// example bundles with `xgr deploy`, starts six sessions with `xgr enqueue` (the KYC-like pair,
// a finished 2-of-3 kill join, an open 2-of-3 join waiting for its third producer, two KYC orders
// waiting for their check), then drives headless chromium through the pages: the list (filters),
// each session's graph overlay (step states, the join node's k-of-n text), the inspector, the
// live updates after a wake (no reload), pause / resume / wake / kill / retry / fork from the page, a step's API
// calls and a refused internal wake-up in the timeline, and the registry page. Screenshots go to
// OUTDIR (test artifacts). Every wait is bounded.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ok, until, startXgrd, run, rpc, openPage } from './common.mjs';

const [XGR, XGRD, OUT, CHROMIUM] = process.argv.slice(2);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const SRC = path.resolve(HERE, '..', '..');
const OWNER = '0x00000000000000000000000000000000000000d1';
// hibernation as by default (--hibernate-after 5000): sessions that wait evict themselves while the
// test runs; the owners line and the live counts come from the store, so they count them still
// --allow-outbound loopback: the price API of part 8 is served by this test on 127.0.0.1, which the
// outbound policy refuses unless allowed (docs/SECURITY.md, Outbound calls)
const { daemon, tmp, url } = startXgrd(XGRD, 'xgr-console-', dir => ['--auth', 'none', '--store', `sqlite:${dir}/store.db`,
  '--allow-outbound', 'loopback']);
let browser;

async function main() {
  const URL = await url();
  await until('xgrd ready', async () => (await fetch(URL + '/readyz')).ok);
  const x = (...args) => execFileSync(XGR, [...args, '--url', URL], { encoding: 'utf8' });
  x('deploy', path.join(SRC, 'examples/bundles/kyc_onboarding.json'), '--registry', 'kyc_onboarding');
  x('deploy', path.join(SRC, 'examples/bundles/kofn_race.json'), '--registry', 'kofn_race');
  x('deploy', path.join(SRC, 'examples/bundles/race_wait.json'), '--registry', 'race_wait');
  const allow = JSON.stringify({ __wakeUp: { steps: { ship: { internal: ['*'], rpc: [OWNER] } } } });
  const enq = (root, reg, step, payload) =>
    x('enqueue', '--owner', OWNER, '--root', String(root), '--registry', reg, '--step', step, '--payload', payload);
  enq(1, 'kyc_onboarding', 'order', allow);
  const session = (root) => rpc(URL, 'xgr.console.session', { owner: OWNER, rootPid: String(root) });
  await until('order 1 waits at ship', async () => (await session(1)).steps.ship.waiting === 1);
  enq(2, 'kyc_onboarding', 'kyc_collect', JSON.stringify({ Runner: OWNER, Target: 1 }));
  enq(3, 'kofn_race', 'A', '{"B":"error"}');
  enq(4, 'race_wait', 'A', '{"B":"error"}');
  enq(5, 'kyc_onboarding', 'order', allow);
  enq(6, 'kyc_onboarding', 'order', allow);
  await until('the KYC check wakes order 1', async () => (await session(1)).session.status === 'completed');
  await until('race 4 waits for D', async () => (await session(4)).steps.D.waiting === 1);
  await until('orders 5 and 6 wait', async () => (await session(5)).steps.ship.waiting === 1 && (await session(6)).steps.ship.waiting === 1);

  const { browser: b, page, pageErrors } = await openPage(CHROMIUM, { consoleErrors: true });
  browser = b;
  let promptAnswer = '';   // what a prompt() (retry / fork: the payload) is answered with
  page.on('dialog', d => d.accept(d.type() === 'prompt' ? promptAnswer : undefined));
  const shot = name => page.screenshot({ path: path.join(OUT, name), fullPage: true });
  const text = sel => page.$eval(sel, e => e.textContent);
  const waitText = (sel, s, ms = 10000) => page.waitForFunction((q, t) => {
    const e = document.querySelector(q); return e && e.textContent.includes(t);
  }, { timeout: ms }, sel, s);
  const hasClass = (sel, cls) => page.$eval(sel, (e, c) => e.classList.contains(c), cls).catch(() => false);

  // 1. the list; without an owner the page offers the owners with live sessions
  await page.evaluate(() => localStorage.clear()).catch(() => {});
  await page.goto(`${URL}/ui/#/sessions`);
  await page.evaluate(() => localStorage.clear());
  await page.goto(`${URL}/ui/?fresh#/sessions`);
  await page.waitForSelector('#owners a', { timeout: 5000 });
  ok((await text('#owners')).includes(`${OWNER} (3 live)`), 'the start page offers the owners with live sessions', await text('#owners'));
  await page.click('#owners a');
  await page.waitForSelector('#sessions tbody tr');
  const rows = await page.$$eval('#sessions tbody tr', trs => trs.map(t => t.textContent.replace(/\s+/g, ' ').trim()));
  ok(rows.length === 6, 'list shows the 6 sessions', rows);
  ok(rows[0].startsWith('6 ') && rows[5].startsWith('1 '), 'newest first', rows.map(r => r.slice(0, 3)));
  ok(/completed/.test(rows[5]) && /running/.test(rows[0]), 'list statuses', [rows[0], rows[5]]);
  ok((await text('#c-live')).trim() === '3', 'live count: 3 live sessions', await text('#counts'));
  await page.waitForFunction(() => document.querySelector('#live.on'), { timeout: 5000 });
  await shot('01-sessions.png');
  await page.goto(`${URL}/ui/#/sessions?owner=${OWNER}&status=completed&registry=kyc_onboarding`);
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 2, { timeout: 5000 });
  ok(true, 'filter registry + status: 2 completed KYC sessions');
  await page.goto(`${URL}/ui/#/sessions?owner=${OWNER}&step=D`);
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 1, { timeout: 5000 });
  ok((await text('#sessions tbody tr td')).trim() === '4', 'filter by step D: session 4');

  // 2. the KYC-like pair: order 1 was woken by the check session 2
  await page.goto(`${URL}/ui/#/session/${OWNER}/1`);
  await page.waitForSelector('#graph svg #step-ship');
  await page.waitForFunction(() => document.querySelector('#step-ship.st-done'), { timeout: 5000 });
  ok(await hasClass('#step-order', 'st-done'), 'KYC order: step order done');
  ok((await text('#sstatus')).includes('completed'), 'KYC order: completed');
  ok(await hasClass('#spawn-order-ship-valid', 'fired'), 'KYC order: spawn edge order→ship fired');
  await page.click('#proctable tr[data-pid="1:2"]');
  await waitText('#inspector', '__wakeUp');
  await page.waitForSelector('#insp-wakeup');
  const insp = await text('#inspector');
  ok(insp.includes('"internal"') && insp.includes('KycSession') && insp.includes('"Shipped": true'),
    'inspector: payload with the KYC wake-up and the __wakeUp allow list', insp.slice(0, 300));
  ok((await text('#timeline')).includes('ship'), 'timeline lists ship');
  await shot('02-kyc-order.png');
  await page.goto(`${URL}/ui/#/session/${OWNER}/2`);
  await page.waitForFunction(() => document.querySelector('#step-kyc_verify.st-done'), { timeout: 5000 });
  ok(await hasClass('#step-kyc_collect', 'st-done'), 'KYC check: collect and verify done');
  await shot('03-kyc-check.png');

  // 3. the finished 2-of-3 kill join: B failed, C and D arrived
  await page.goto(`${URL}/ui/#/session/${OWNER}/3`);
  await page.waitForSelector('#join-A-valid .live-label');
  const jt = await text('#join-A-valid');
  // B's hard error closes its slot only if it lands before C and D close the join (timing)
  ok(jt.includes('2 of 3') && jt.includes('2/2 pieces · satisfied') && jt.includes('inbox: C, D'),
    'finished join node: 2 of 3, 2/2 pieces, inbox C D, satisfied', jt);
  ok(await hasClass('#step-B', 'st-aborted'), 'step B aborted');
  ok(await hasClass('#step-J', 'st-done') && await hasClass('#step-C', 'st-done'), 'steps C and J done');
  ok(await hasClass('#from-C-A-valid', 'fired') && !(await hasClass('#from-B-A-valid', 'fired')), 'from edge C fired, B did not');
  ok(await hasClass('#target-A-valid', 'fired'), 'join target edge fired');
  ok((await text('#joins')).includes('2 of 2'), 'join card: 2 of 2 needed', await text('#joins'));
  ok((await text('#timeline')).includes('division by zero'), 'timeline shows B\'s error');
  await shot('04-join-2of3-finished.png');

  // 4. the open 2-of-3 join; wake D by PID from the page and watch it close live
  await page.goto(`${URL}/ui/#/session/${OWNER}/4`);
  await page.waitForSelector('#join-A-valid .live-label');
  const jo = await text('#join-A-valid');
  ok(jo.includes('1/2 pieces · open') && jo.includes('inbox: C') && jo.includes('failed: B') && jo.includes('can still be satisfied'),
    'open join node: 1/2 pieces, inbox C, failed B, can still be satisfied', jo);
  ok(await hasClass('#step-D', 'st-waiting'), 'step D waiting');
  ok((await text('#joins')).includes('failed: B'), 'join card lists the fail record', await text('#joins'));
  await shot('05-join-open.png');
  await page.evaluate(() => { window.__sameDocument = true; });
  const dpid = await page.$eval('#proctable', t => [...t.querySelectorAll('tr[data-pid]')]
    .find(tr => tr.children[1].textContent === 'D').dataset.pid);
  await page.select('#w-mode', 'pid');
  await page.$eval('#w-pid', (e, v) => { e.value = v; }, dpid);
  await page.click('#a-wake');
  await waitText('#join-A-valid', '2/2 pieces · satisfied');
  await page.waitForFunction(() => document.querySelector('#step-J.st-done'), { timeout: 10000 });
  ok(await page.evaluate(() => window.__sameDocument === true), 'the page updated live (no reload)');
  ok((await text('#feed')).includes('join at J'), 'live events list the join decision', await text('#feed'));
  await shot('06-join-closed-live.png');

  // 4b. retry and fork (issue 36): race 20's B failed (hard error) while its 2-of-3 join is open;
  // "Retry this process…" with a fixed payload runs B again and its piece satisfies the join; then
  // "Fork a new session from this step…" on C starts a new session at C and opens its page
  enq(20, 'race_wait', 'A', '{"B":"error"}');
  await until('race 20 waits for D', async () => (await session(20)).steps.D.waiting === 1);
  await page.goto(`${URL}/ui/#/session/${OWNER}/20`);
  await page.waitForSelector('#join-A-valid .live-label');
  const bpid = await page.$eval('#proctable', t => [...t.querySelectorAll('tr[data-pid]')]
    .find(tr => tr.children[1].textContent === 'B').dataset.pid);
  await page.click(`#proctable tr[data-pid="${bpid}"]`);
  await page.waitForSelector('#insp-retry');
  promptAnswer = '{"B":"valid"}';
  await page.click('#insp-retry');
  await waitText('#join-A-valid', '2/2 pieces · satisfied');
  ok(true, 'retry from the inspector: the retried B satisfied the open join');
  await page.waitForSelector('#history tr.audit');
  ok((await text('#timeline')).includes('retried as process'), 'the timeline shows the retry', await text('#timeline'));
  await shot('06b-retried.png');
  const cpid = await page.$eval('#proctable', t => [...t.querySelectorAll('tr[data-pid]')]
    .find(tr => tr.children[1].textContent === 'C').dataset.pid);
  await page.click(`#proctable tr[data-pid="${cpid}"]`);
  await page.waitForSelector('#insp-fork');
  promptAnswer = '';
  await page.click('#insp-fork');
  await page.waitForFunction(o => new RegExp(`#/session/${o}/(\\d+)$`).test(location.hash) && !location.hash.endsWith('/20'),
    { timeout: 10000 }, OWNER);
  const forked = await page.evaluate(() => location.hash.split('/').pop());
  const fv = await rpc(URL, 'xgr.getSession', { owner: OWNER, rootPid: forked });
  ok(fv.session.forkedFrom && fv.session.forkedFrom.rootPid === 20 && fv.session.forkedFrom.step === 'C',
    'fork from the inspector: the new session records its source', JSON.stringify(fv.session.forkedFrom));
  await waitText('#forked-from', 'session 20');
  ok(true, 'the forked session\'s page says where it was forked from');

  // 5. pause, resume and wake (step mode, payload editor) on KYC order 5
  await page.goto(`${URL}/ui/#/session/${OWNER}/5`);
  await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting'), { timeout: 5000 });
  await page.click('#a-pause');
  await page.waitForFunction(() => document.querySelector('#step-ship.st-paused'), { timeout: 5000 });
  ok((await text('#proctable')).includes('paused'), 'pause: the ship process is paused');
  await shot('07-paused.png');
  await page.click('#a-resume');
  await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting'), { timeout: 5000 });
  ok(true, 'resume: ship waits again');
  await page.select('#w-mode', 'step');
  await page.select('#w-step', 'ship');
  await page.$eval('#w-payload', e => { e.value = '{"KycOk": true}'; });
  await page.click('#a-wake');
  await waitText('#sstatus', 'completed');
  ok(await hasClass('#step-ship', 'st-done'), 'wake (step mode) with payload: ship ran, session completed');
  // clicked inside the page: the live refresh may redraw the table between finding the row and a mouse click
  await until('the woken ship row is clicked', () => page.$eval('#proctable tr[data-pid="5:2"]', e => { e.click(); return true; }));
  await waitText('#inspector', '"Shipped": true');
  ok(true, 'inspector: the woken ship shipped with KycOk from the payload editor');
  await shot('08-woken.png');

  // 6. kill KYC order 6
  await page.goto(`${URL}/ui/#/session/${OWNER}/6`);
  await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting'), { timeout: 5000 });
  await page.click('#a-kill');
  await waitText('#sstatus', 'killed');
  ok(await hasClass('#step-ship', 'st-aborted'), 'kill: ship aborted, session killed');
  await shot('09-killed.png');

  // 7. the KYC pair live: order 7 is on screen when check session 8 wakes its ship
  enq(7, 'kyc_onboarding', 'order', allow);
  await until('order 7 waits at ship', async () => (await session(7)).steps.ship.waiting === 1);
  await page.goto(`${URL}/ui/#/session/${OWNER}/7`);
  await page.waitForFunction(() => document.querySelector('#step-ship.st-waiting') && document.querySelector('#live.on'), { timeout: 5000 });
  enq(8, 'kyc_onboarding', 'kyc_collect', JSON.stringify({ Runner: OWNER, Target: 7 }));
  await page.waitForFunction(() => document.querySelector('#step-ship.st-done.woken'), { timeout: 10000 });
  ok((await text('#step-ship')).includes('woken ×1'), 'the internal wake-up from session 8 shows on ship, live', await text('#step-ship'));
  ok((await text('#feed')).includes('internal wake-up of session 7 step ship: woken'), 'live events list the internal wake-up');
  await shot('10-kyc-woken-live.png');

  // 7b. the audit trail (issue 35): after a reload ship still says woken ×1 (counted from the store),
  // and the timeline shows who did what — the internal wake-up from session 8, the kill of session 6
  await page.reload();
  await page.waitForFunction(() => document.querySelector('#step-ship.woken'), { timeout: 10000 });
  ok((await text('#step-ship')).includes('woken ×1'), 'after a reload ship still says woken ×1 (the stored audit trail)',
     await text('#step-ship'));
  await page.waitForSelector('#history tr.audit');
  const arows = await page.$$eval('#history tr.audit', trs => trs.map(t => t.textContent.replace(/\s+/g, ' ').trim()));
  ok(arows.length === 1 && arows[0].includes('wake-internal') && arows[0].includes(`${OWNER}/8`) &&
     arows[0].includes('step ship'), 'the timeline shows the internal wake-up from session 8 and its step', arows);
  await page.goto(`${URL}/ui/#/session/${OWNER}/6`);
  await page.waitForSelector('#history tr.audit');
  const krows = await page.$$eval('#history tr.audit', trs => trs.map(t => t.textContent.replace(/\s+/g, ' ').trim()));
  ok(krows.length === 1 && krows[0].includes('kill') && krows[0].includes('auth-none'),
     'the timeline of session 6 shows its kill and who killed it', krows);
  await shot('10b-audit.png');

  // 8. a step's API calls in the timeline: a price endpoint on 127.0.0.1 served by this test
  const http = await import('node:http');
  const api = http.createServer((req, res) => {
    res.writeHead(req.url.startsWith('/price') ? 200 : 404, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ data: { amount: '42.5' } }));
  });
  await new Promise(r => api.listen(0, '127.0.0.1', r));
  const apiUrl = `http://127.0.0.1:${api.address().port}`;
  const fetchBundle = { orchestration: { id: 'price', structure: { fetch: { rule: 'fetch' } } },
    rules: { fetch: { payload: { Pair: { type: 'string', default: 'BTC-USD' } },
      apiCalls: [{ name: 'spot', method: 'GET', urlTemplate: `${apiUrl}/price/[Pair]`, contentType: 'json',
        extractMap: { Price: { type: 'double', default: 0, value: 'resp.data.amount' } } },
      { name: 'missing', method: 'GET', urlTemplate: `${apiUrl}/nope`, contentType: 'json',
        extractMap: { Other: { type: 'double', default: 0, value: 'resp.data.amount' } } }],
      rules: ['[Price] > 0.0'], onValid: { payload: { Got: '[Price]' } }, onInvalid: {} } } };
  const { writeFileSync } = await import('node:fs');
  writeFileSync(`${tmp}/price.json`, JSON.stringify(fetchBundle));
  x('deploy', `${tmp}/price.json`, '--registry', 'price');
  enq(9, 'price', 'fetch', '{}');
  await until('the price session ends', async () => (await session(9)).session.status !== 'running');
  await page.goto(`${URL}/ui/#/session/${OWNER}/9`);
  await page.waitForSelector('#history tr.api');
  const calls = await page.$$eval('#history tr.api', trs => trs.map(t => t.textContent.replace(/\s+/g, ' ').trim()));
  ok(calls.length === 2 && calls[0].includes('API call spot') && calls[0].includes('/price/BTC-USD') && calls[0].includes('→ 200') &&
     calls[1].includes('API call missing') && calls[1].includes('404'), 'the timeline shows the step\'s API calls (URL, status, time)', calls);
  await shot('11-api-calls.png');
  api.close();

  // 8b. a refused internal wake-up in the timeline: check session 10 wakes a session that does not exist
  enq(10, 'kyc_onboarding', 'kyc_collect', JSON.stringify({ Runner: OWNER, Target: 999 }));
  const refused = await until('session 10 records the refused wake-up', async () =>
    (await session(10)).history.items.find(it => it.status === 'wake_refused'));
  const asc = (await rpc(URL, 'xgr.console.session', { owner: OWNER, rootPid: '10', histOrder: 'asc' })).history;
  const page2 = (await rpc(URL, 'xgr.console.session', { owner: OWNER, rootPid: '10', histOrder: 'asc',
    histOffset: asc.total - 1, histLimit: 1 })).history;
  ok(asc.total === asc.items.length && asc.items.at(-1).status === 'wake_refused' && asc.items.at(-2).pid === refused.pid &&
     page2.items.length === 1 && page2.items[0].wakeUp.sessionId === '999',
    'xgr.console.session counts the refusal in history.total and pages it after the row of its sender', { asc, page2 });
  await page.goto(`${URL}/ui/#/session/${OWNER}/10`);
  await page.waitForSelector('#history tr.refused');
  const rrows = await page.$$eval('#history tr.refused', trs => trs.map(t => t.textContent.replace(/\s+/g, ' ').trim()));
  ok(rrows.length === 1 && rrows[0].includes('wake_refused') && rrows[0].includes(`wake-up sent by ${refused.pid} (step ${refused.step})`) &&
     rrows[0].includes(`to ${OWNER}/999 step ship`) && rrows[0].includes('no such session'),
    'the timeline shows the refused wake-up: who sent it, to whom, why', { rrows, refused });
  ok(await page.$eval('#history tr.refused .badge', e => e.classList.contains('b-wake_refused')), 'the refused row is styled apart');
  const order = await page.$$eval('#history tbody tr', trs => trs.map(t => t.classList.contains('refused') ? 'refused' : t.children[2].textContent));
  ok(order.indexOf('refused') === order.indexOf(refused.step) - 1, 'newest first: the refusal stands above the row of the step that sent it', order);
  await shot('11b-wake-refused.png');

  // 9. the registry page
  await page.goto(`${URL}/ui/#/registry?registry=race_wait`);
  await page.waitForSelector('#rgraph svg #join-A-valid');
  ok((await text('#check-result')).includes('passes'), 'registry: xgr check passes');
  ok((await page.$$('#rules tbody tr')).length === 6, 'registry: six steps with their rules');
  ok((await text('#rules')).includes('v1'), 'registry: rule versions listed');
  await shot('12-registry.png');

  ok(pageErrors.length === 0, 'no errors in the page', pageErrors);
}

await run(main, { daemon, seconds: 120, after: async () => { if (browser) await browser.close(); }, note: `; screenshots in ${OUT}` });
