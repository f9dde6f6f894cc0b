// wake.js URL OWNER_KEY HELPER_KEY STRANGER_KEY — xgr_wakeUpProcess as a wallet calls it (public
// reference §12), against a real xgrd in permit mode that wake_ethers.sh set up: the owner's
// sessions 1 and 2 wait at step W (2 with an allow list: __wakeUp.steps.W.rpc = [helper]).
//
// Like a dapp with a wallet: the chain id and the control contract come from xgr_getCoreAddrs,
// ethers' Wallet.signTypedData signs (what eth_signTypedData_v4 does), and the request is the
// permit and a payload alone — the session, the runner and the step are the permit's. Checked,
// with exact JSON-RPC codes:
//   - step mode: {payload, permit} wakes session 1's W (ControlPermit), the owner's answer, and W runs;
//   - PID mode: a signed stepId is refused (-32007 at permit.message.stepId); a wake of another
//     owner's process by pid is refused (-32007);
//   - delegation: the helper on W's allow list wakes session 2 with a ControlPermitV2 (runner =
//     the owner); a stranger not on it is refused (-32007).
'use strict';
const { ethers } = require('ethers');
const { CONTROL, CONTROL_V2, make, client } = require('./permits.js');

const [URL, OWNER_KEY, HELPER_KEY, STRANGER_KEY] = process.argv.slice(2);
const owner = new ethers.Wallet(OWNER_KEY), helper = new ethers.Wallet(HELPER_KEY);
const stranger = new ethers.Wallet(STRANGER_KEY);
const OWNER = owner.address.toLowerCase();

const { rpc, check, refused } = client(URL);

async function main() {
  const core = (await rpc('xgr_getCoreAddrs', [])).result;
  check(core && /^0x[0-9a-f]+$/.test(core.chainId) && ethers.isAddress(core.precompile),
    'xgr_getCoreAddrs gives the chain id and the control contract', core);
  const domain = { name: 'XDaLa ControlPermit', version: '1', chainId: BigInt(core.chainId),
    verifyingContract: core.precompile };
  const expiry = BigInt(Math.floor(Date.now() / 1000) + 300);
  const control = (w, sessionId, stepId) => make(w, domain, 'ControlPermit', CONTROL,
    { from: w.address, sessionId, action: 'wake', stepId, expiry }).then((m) => m.permit);
  const controlV2 = (w, sessionId, stepId) => make(w, domain, 'ControlPermitV2', CONTROL_V2,
    { from: w.address, runner: owner.address, sessionId, action: 'wake', stepId, expiry }).then((m) => m.permit);

  // PID mode: the permit signs no step; and only the owner wakes by pid
  refused(await rpc('xgr_wakeUpProcess', [{ processId: '1:2', permit: await control(owner, 1n, 'W') }]), -32007,
    'permit.message.stepId', 'a PID-mode wake with a signed stepId is refused');
  refused(await rpc('xgr_wakeUpProcess', [{ processId: '1:2', permit: await control(stranger, 1n, '') }]), -32007,
    'processId', "a PID-mode wake of the owner's process by another wallet is refused");

  // step mode: the permit and a payload, nothing else
  let r = await rpc('xgr_wakeUpProcess', [{ payload: { n: 41 }, permit: await control(owner, 1n, 'W') }]);
  check(r.result && r.result.ok === true && r.result.mode === 'step' && r.result.woken === 1 &&
    r.result.owner === OWNER && r.result.sessionId === 1 && r.result.rootPid === '1',
  'a step-mode wake of {payload, permit} wakes W of session 1', r);
  let done = null;
  for (let i = 0; i < 250 && done !== true; i++) {
    done = (await rpc('xgr_stepExecuted', [OWNER, '1', 2])).result;
    if (done !== true) await new Promise((f) => setTimeout(f, 20));
  }
  check(done === true, 'W of session 1 ran (xgr_stepExecuted)');

  // delegation: the allow list of session 2's W names the helper, not the stranger
  refused(await rpc('xgr_wakeUpProcess', [{ permit: await controlV2(stranger, 2n, 'W') }]), -32007, null,
    'a wallet not on the allow list is refused');
  r = await rpc('xgr_wakeUpProcess', [{ payload: { n: 1 }, permit: await controlV2(helper, 2n, 'W') }]);
  check(r.result && r.result.mode === 'step' && r.result.woken === 1 && r.result.owner === OWNER,
    'the allow-listed helper wakes W of session 2 with a ControlPermitV2', r);
  console.log('wake.js: ok');
}

main().catch((e) => { console.error(e); process.exit(2); });
