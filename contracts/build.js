// Compiles contracts/src/*.sol with the pinned solc-js (bundled compiler,
// works offline) and writes build/<Contract>.json = {contractName, abi,
// bytecode, compiler}. `node build.js --check` recompiles and exits 1 when
// the committed build output differs (the C tests use the committed files).
'use strict';
const fs = require('fs');
const path = require('path');
const solc = require('solc');

const srcDir = path.join(__dirname, 'src');
const outDir = path.join(__dirname, 'build');
const check = process.argv.includes('--check');

const sources = {};
for (const f of fs.readdirSync(srcDir).filter((f) => f.endsWith('.sol')).sort()) {
  sources[f] = { content: fs.readFileSync(path.join(srcDir, f), 'utf8') };
}
const input = {
  language: 'Solidity',
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: 'cancun',
    metadata: { bytecodeHash: 'none' },
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
let failed = false;
for (const e of out.errors || []) {
  process.stderr.write(e.formattedMessage + '\n');
  if (e.severity === 'error') failed = true;
}
if (failed) process.exit(1);

if (!check) fs.mkdirSync(outDir, { recursive: true });
let differ = 0;
for (const file of Object.keys(out.contracts).sort()) {
  for (const name of Object.keys(out.contracts[file]).sort()) {
    const c = out.contracts[file][name];
    if (!c.evm.bytecode.object) continue;   // abstract: nothing to deploy
    const doc = {
      contractName: name,
      compiler: solc.version(),
      abi: c.abi,
      bytecode: '0x' + c.evm.bytecode.object,
    };
    const text = JSON.stringify(doc, null, 1) + '\n';
    const target = path.join(outDir, name + '.json');
    if (check) {
      const have = fs.existsSync(target) ? fs.readFileSync(target, 'utf8') : '';
      if (have !== text) {
        process.stderr.write(`build/${name}.json differs from a fresh compile\n`);
        differ++;
      }
    } else {
      fs.writeFileSync(target, text);
      process.stdout.write(`build/${name}.json\n`);
    }
  }
}
process.exit(differ ? 1 : 0);
