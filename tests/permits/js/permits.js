// permits.js — ethers v6 (pinned in package-lock.json) as the reference implementation for xgr's
// EIP-712 permits (its types and `make` are also exported for wake.js). Three modes:
//   node permits.js fixtures DIR   deterministic keys and values: writes DIR/<name>.json, each
//                                  {permit, digest, signer} (and the general encoder vector)
//   node permits.js random N       N fresh permits of every kind with random keys and values,
//                                  printed as a JSON array of {permit, digest, signer, policy}
//   node permits.js verify         reads a JSON array of permits on stdin, recovers each signer
//                                  with verifyTypedData and checks it equals message.from;
//                                  prints {ok, signers} and exits 1 on any mismatch
'use strict';
const fs = require('fs');
const path = require('path');
const { ethers } = require('ethers');

const SESSION = [
  { name: 'from', type: 'address' }, { name: 'ostcId', type: 'string' }, { name: 'ostcHash', type: 'bytes32' },
  { name: 'sessionId', type: 'uint256' }, { name: 'maxTotalGas', type: 'uint256' }, { name: 'expiry', type: 'uint256' },
];
const CONTROL = [
  { name: 'from', type: 'address' }, { name: 'sessionId', type: 'uint256' }, { name: 'action', type: 'string' },
  { name: 'stepId', type: 'string' }, { name: 'expiry', type: 'uint256' },
];
const CONTROL_LEGACY = CONTROL.filter((f) => f.name !== 'stepId');
const CONTROL_V2 = [
  { name: 'from', type: 'address' }, { name: 'runner', type: 'address' }, { name: 'sessionId', type: 'uint256' },
  { name: 'action', type: 'string' }, { name: 'stepId', type: 'string' }, { name: 'expiry', type: 'uint256' },
];
const XDALA = [{ name: 'from', type: 'address' }, { name: 'expiry', type: 'uint256' }];

async function make(wallet, domain, primary, fields, message) {
  const types = { [primary]: fields };
  const signature = await wallet.signTypedData(domain, types, message);
  const payload = ethers.TypedDataEncoder.getPayload(domain, types, message);
  return {
    permit: { domain: payload.domain, types: payload.types, primaryType: primary, message: payload.message, signature },
    digest: ethers.TypedDataEncoder.hash(domain, types, message),
    signer: wallet.address.toLowerCase(),
  };
}

async function fixtures(dir) {
  const owner = new ethers.Wallet('0x' + '11'.repeat(32));
  const helper = new ethers.Wallet('0x' + '22'.repeat(32));
  const chainId = 1879;
  const control = '0x00000000000000000000000000000000000000aa';
  const expiry = 4102444800; // 2100-01-01
  const out = {};
  out.session = await make(owner, { name: 'XDaLa SessionPermit', version: '1', chainId }, 'SessionPermit', SESSION, {
    from: owner.address, ostcId: 'orders', ostcHash: ethers.keccak256(ethers.toUtf8Bytes('orders')),
    sessionId: 7n, maxTotalGas: 5000000n, expiry,
  });
  const cdom = { name: 'XDaLa ControlPermit', version: '1', chainId, verifyingContract: control };
  out.control_kill = await make(owner, cdom, 'ControlPermit', CONTROL,
    { from: owner.address, sessionId: 7n, action: 'kill', stepId: '', expiry });
  out.control_wake_step = await make(owner, cdom, 'ControlPermit', CONTROL,
    { from: owner.address, sessionId: 7n, action: 'wake', stepId: 'Approve', expiry });
  out.control_legacy_pause = await make(owner, cdom, 'ControlPermit', CONTROL_LEGACY,
    { from: owner.address, sessionId: 7n, action: 'pause', expiry });
  out.control_v2_wake = await make(helper, cdom, 'ControlPermitV2', CONTROL_V2,
    { from: helper.address, runner: owner.address, sessionId: 7n, action: 'wake', stepId: 'Approve', expiry });
  out.xdala = await make(owner, { name: 'XDaLa Permit', version: '1', chainId }, 'xdalaPermit', XDALA,
    { from: owner.address, expiry });
  // the general encoder: nested structs, arrays (dynamic, fixed, nested), every atomic family
  const gtypes = {
    Mail: [{ name: 'from', type: 'Person' }, { name: 'to', type: 'Person[]' }, { name: 'contents', type: 'string' },
      { name: 'attachments', type: 'bytes[2]' }, { name: 'grid', type: 'int16[][]' }, { name: 'flags', type: 'bool[]' }],
    Person: [{ name: 'name', type: 'string' }, { name: 'wallet', type: 'address' }, { name: 'tag', type: 'bytes4' },
      { name: 'balance', type: 'uint128' }, { name: 'delta', type: 'int256' }, { name: 'home', type: 'Address' }],
    Address: [{ name: 'street', type: 'string' }, { name: 'zip', type: 'uint32' }],
  };
  const person = (n, w, d) => ({ name: n, wallet: w, tag: '0xdeadbeef', balance: 2n ** 127n + 5n, delta: d,
    home: { street: 'Hauptstraße ' + n, zip: 8001 } });
  const gdomain = { name: 'Ether Mail', version: '1', chainId: 1, verifyingContract: control, salt: '0x' + 'ab'.repeat(32) };
  const gmsg = {
    from: person('Cow', owner.address, -(2n ** 255n)), to: [person('Bob', helper.address, 42n), person('Eve', control, -1n)],
    contents: 'Hello, Bob! 💌', attachments: ['0x', '0x0102030405'], grid: [[1, -2, 32767], [], [-32768]],
    flags: [true, false],
  };
  const enc = ethers.TypedDataEncoder.from(gtypes);
  out.eip712_general = {
    typed: ethers.TypedDataEncoder.getPayload(gdomain, gtypes, gmsg),
    encodeType: enc.encodeType('Mail'),
    domainSeparator: ethers.TypedDataEncoder.hashDomain(gdomain),
    hashStruct: enc.hashStruct('Mail', gmsg),
    digest: ethers.TypedDataEncoder.hash(gdomain, gtypes, gmsg),
    signature: await owner.signTypedData(gdomain, gtypes, gmsg),
    signer: owner.address.toLowerCase(),
  };
  for (const [name, v] of Object.entries(out))
    fs.writeFileSync(path.join(dir, name + '.json'), JSON.stringify(v, null, 2) + '\n');
}

const rnd = (n) => ethers.hexlify(ethers.randomBytes(n));
const rndBig = (bytes) => BigInt(rnd(bytes));
const rndStr = () => {
  const alphabet = 'abcXYZ019_-. äöü€💌"\\\n\t';
  const len = Math.floor(Math.random() * 40);
  let s = '';
  for (let i = 0; i < len; i++) s += [...alphabet][Math.floor(Math.random() * [...alphabet].length)];
  return s;
};

async function random(n) {
  const res = [];
  for (let i = 0; i < n; i++) {
    const w = ethers.Wallet.createRandom();
    const chainId = rndBig(Math.floor(Math.random() * 8) + 1);
    const control = ethers.getAddress(rnd(20));
    const expiry = 4102444800n + rndBig(3);
    const policy = { chainId: chainId.toString(), controlContract: control.toLowerCase(), now: 1700000000 };
    const cdom = { name: rndStr() || 'x', version: rndStr() || '1', chainId, verifyingContract: control };
    const sid = rndBig(Math.floor(Math.random() * 32) + 1);
    const kinds = [
      () => make(w, { name: 'XDaLa SessionPermit', version: '1', chainId }, 'SessionPermit', SESSION,
        { from: w.address, ostcId: rndStr(), ostcHash: rnd(32), sessionId: sid, maxTotalGas: rndBig(32), expiry }),
      () => make(w, cdom, 'ControlPermit', CONTROL,
        { from: w.address, sessionId: sid, action: ['pause', 'resume', 'kill', 'wake'][i % 4], stepId: rndStr(), expiry }),
      () => make(w, cdom, 'ControlPermitV2', CONTROL_V2,
        { from: w.address, runner: ethers.getAddress(rnd(20)), sessionId: sid, action: 'wake', stepId: rndStr(), expiry }),
      () => make(w, { name: rndStr() || 'p', version: rndStr() || 'v', chainId }, 'xdalaPermit', XDALA,
        { from: w.address, expiry }),
    ];
    for (const k of kinds) res.push(Object.assign(await k(), { policy }));
  }
  process.stdout.write(JSON.stringify(res) + '\n');
}

function verify() {
  const permits = JSON.parse(fs.readFileSync(0, 'utf8'));
  const signers = [];
  let ok = true;
  for (const p of permits) {
    const types = Object.assign({}, p.types);
    delete types.EIP712Domain;
    const s = ethers.verifyTypedData(p.domain, types, p.message, p.signature).toLowerCase();
    signers.push(s);
    if (s !== p.message.from.toLowerCase()) ok = false;
  }
  process.stdout.write(JSON.stringify({ ok, signers }) + '\n');
  process.exit(ok ? 0 : 1);
}

// required as a module (wake.js): the permit types and `make`
/* A JSON-RPC client of xgrd at url for the live tests (wake.js, grants.js): rpc(method, params)
 * answers the whole response; check(cond, what, detail) prints "ok" or fails the run; refused(answer,
 * code, path, what) checks an exact error code (and data.path when path is given). */
function client(url) {
  let id = 0;
  async function rpc(method, params) {
    const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }) });
    return res.json();
  }
  function check(cond, what, detail) {
    if (!cond) {
      console.error('FAIL: ' + what + (detail ? ': ' + JSON.stringify(detail) : ''));
      process.exit(1);
    }
    console.log('ok   ' + what);
  }
  function refused(answer, code, path, what) {
    const e = answer.error;
    check(e && e.code === code && (!path || (e.data && e.data.path === path)),
      what + ` (${code}${path ? ' at ' + path : ''})`, answer);
  }
  return { rpc, check, refused };
}

module.exports = { SESSION, CONTROL, CONTROL_V2, XDALA, make, client };

if (require.main === module) {
  const [mode, arg] = process.argv.slice(2);
  if (mode === 'fixtures') fixtures(arg).catch((e) => { console.error(e); process.exit(2); });
  else if (mode === 'random') random(Number(arg || 10)).catch((e) => { console.error(e); process.exit(2); });
  else if (mode === 'verify') verify();
  else { console.error('usage: node permits.js fixtures DIR | random N | verify < permits.json'); process.exit(2); }
}
