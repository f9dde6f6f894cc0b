// migrate.test.mjs XGR XGRD OUTDIR CHROMIUM — the session page's migrate action in a real browser
// (issue 36; docs/SEMANTICS.md "Migration").
//
// xgrd (--auth none, SQLite in a temporary directory) on 127.0.0.1. Orchestration `hold` (version 1:
// main, then end after an hour's wait) runs sessions 1 and 2, both waiting to run end. Then:
//  1. version 2 of `hold` has no step end: on session 1's page, Check (a dry run) answers
//     "refused" naming end, shown as an error; nothing changes;
//  2. version 3 keeps end and adds finish after it: Check answers "safe" and changes nothing;
//     Migrate (confirmed) answers "migrated": xgrd says session 1 now pins version 3's bundle, has
//     one migrate audit entry (old, new, not forced) that the page's timeline shows, and still
//     waits to run end; session 2 keeps version 1;
//  3. woken, session 1 runs version 3's tail (end, finish), session 2 version 1's (end only).
// Screenshots go to OUTDIR. Every wait is bounded; nothing asserts a duration.
import path from 'node:path';
import { ok, until, startXgrd, run, rpc, openPage, putHold } from './common.mjs';

const [, XGRD, OUT, CHROMIUM] = process.argv.slice(2);
const OWNER = '0x00000000000000000000000000000000000000d3';
const { daemon, url } = startXgrd(XGRD, 'xgr-console-migrate-', dir => ['--auth', 'none', '--store', `sqlite:${dir}/store.db`]);
let browser;

async function main() {
  const URL = await url();
  await until('xgrd ready', async () => (await fetch(URL + '/readyz')).ok);
  const call = (m, p) => rpc(URL, m, p);
  const put = structure => putHold(call, OWNER, structure);
  await putHold(call, OWNER);
  for (const r of [1, 2]) await call('xgr.enqueue', { owner: OWNER, xrc729: 'hold', rootPid: String(r), init: { stepId: 'main' } });
  const sess = r => call('xgr.getSession', { owner: OWNER, rootPid: String(r) });
  const waitingAt = async r => (await sess(r)).processes.filter(p => p.status === 'waiting').map(p => p.resumeStep);
  await until('both sessions wait to run end', async () => (await waitingAt(1))[0] === 'end' && (await waitingAt(2))[0] === 'end');
  const v1 = (await sess(1)).session.bundleHash;

  const { browser: b, page, pageErrors } = await openPage(CHROMIUM);
  browser = b;
  page.on('dialog', d => d.accept());
  const shot = name => page.screenshot({ path: path.join(OUT, name), fullPage: true });
  // the toast of the next action: its text and whether it is an error
  const toastAfter = async click => {
    await page.$eval('#toast', t => { t.hidden = true; t.textContent = ''; });
    await page.click(click);
    await page.waitForFunction(() => !document.querySelector('#toast').hidden && document.querySelector('#toast').textContent,
      { timeout: 20000 });
    return page.$eval('#toast', t => ({ text: t.textContent, bad: t.classList.contains('bad') }));
  };

  // 1. a version without end: refused by the static check
  await put({ main: { rule: 'rwait', onValid: { spawns: ['finish'] } }, finish: { rule: 'rend' } });
  await page.goto(`${URL}/ui/#/session/${OWNER}/1`);
  await page.waitForFunction(() => document.querySelector('#step-end.st-waiting'), { timeout: 10000 });
  await page.$eval('#m-to', e => { e.value = 'hold'; });
  let t = await toastAfter('#a-mcheck');
  ok(t.bad && t.text.includes('dry run') && t.text.includes('refused') && t.text.includes('end'),
    'Check against a version without step end: refused, naming end, shown as an error', t);
  ok((await sess(1)).session.bundleHash === v1 && !(await sess(1)).audit.length, 'the refused check changed nothing');
  await shot('16-migrate-refused.png');

  // 2. a version that keeps end and adds finish after it: safe, then migrated
  await put({ main: { rule: 'rwait', onValid: { spawns: ['end'] } }, end: { rule: 'rend', onValid: { spawns: ['finish'] } },
    finish: { rule: 'rend' } });
  t = await toastAfter('#a-mcheck');
  ok(!t.bad && t.text.includes('dry run') && t.text.includes('safe'), 'Check against the version that keeps end: safe', t);
  ok((await sess(1)).session.bundleHash === v1, 'the dry run changed nothing');
  t = await toastAfter('#a-migrate');
  ok(!t.bad && t.text.includes('migrated'), 'Migrate (confirmed): migrated', t);
  const s1 = await sess(1);
  ok(s1.session.bundleHash && s1.session.bundleHash !== v1, 'xgrd: session 1 pins the new bundle', s1.session.bundleHash);
  const a = s1.audit.filter(e => e.kind === 'migrate');
  ok(a.length === 1 && a[0].detail.oldBundle === v1 && a[0].detail.newBundle === s1.session.bundleHash && a[0].detail.forced === false,
    'one migrate audit entry: old, new, not forced', s1.audit);
  ok(JSON.stringify(await waitingAt(1)) === '["end"]', 'session 1 still waits to run end');
  ok((await sess(2)).session.bundleHash === v1, 'session 2 keeps version 1');
  await page.waitForFunction(() => /migrat/i.test(document.querySelector('#timeline').textContent), { timeout: 10000 });
  ok(true, 'the page\'s timeline shows the migration');
  await shot('17-migrated.png');

  // 3. woken, each runs its own version's tail
  for (const r of [1, 2]) {
    const pid = (await sess(r)).processes.find(p => p.status === 'waiting').pid;
    await call('xgr_wakeUpProcess', { owner: OWNER, processId: pid });
  }
  await until('both sessions complete', async () => (await sess(1)).session.status === 'completed' &&
    (await sess(2)).session.status === 'completed');
  const steps = async r => (await sess(r)).history.map(h => h.step);
  ok(JSON.stringify(await steps(1)) === '["main","end","finish"]', 'session 1 ran version 3: end, then finish', await steps(1));
  ok(JSON.stringify(await steps(2)) === '["main","end"]', 'session 2 ran version 1: end only', await steps(2));
  ok(pageErrors.length === 0, 'no errors in the page', pageErrors);
}

run(main, { daemon, seconds: 200, after: async () => { if (browser) await browser.close(); } });
