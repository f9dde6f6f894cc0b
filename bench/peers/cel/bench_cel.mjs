// bench_cel.mjs — the peers of bench/cel/bench_cel.c: the same expressions (placeholders written
// as plain identifiers, which is what xgr compiles them to) evaluated by two JavaScript CEL
// engines, @marcbachmann/cel-js (Environment, parse once) and cel-js (parse once to a CST). The
// XDaLa helpers these expressions need (abs, quorum with "rel") are registered as JS functions.
// Prints compile µs and evaluations per second per case, like bench_cel.
// Usage: node bench_cel.mjs [SECONDS_PER_CASE]
import {Environment} from '@marcbachmann/cel-js'
import * as celjs from 'cel-js'

const secs = Number(process.argv[2] || 1)

function relDiff (a, b) {
  const den = Math.abs((a + b) / 2)
  if (den === 0) return a === b ? 0 : 1e18
  return Math.abs(a - b) / den
}
// quorum(values, "rel", tol, k), ball mode, as in xgr
function quorum (values, metric, tol, k) {
  const v = values.map(Number)
  let best = 0
  for (let i = 0; i < v.length; i++) {
    let n = 0
    for (let j = 0; j < v.length; j++) if (relDiff(v[i], v[j]) <= Number(tol)) n++
    if (n > best) best = n
  }
  return best >= Number(k)
}

const prices = Array.from({length: 32}, (_, i) => 90 + i * 3 + 0.5)
const ctx = {
  PrevPrice: 100.25, FetchedPrice: 101.5, MaxDeltaPct: 0.02, Iter: 41n,
  FetchedCoinbase: 100.0, FetchedBitstamp: 100.4, FetchedGecko: 97.0, Prices: prices
}
const ctxPlain = {...ctx, Iter: 41}

const cases = [
  ['guardrail', '(PrevPrice == 0.0) || (abs(FetchedPrice - PrevPrice) / PrevPrice <= MaxDeltaPct)'],
  ['iter+1', 'Iter + 1'],
  ['quorum3', 'quorum([FetchedCoinbase, FetchedBitstamp, FetchedGecko], "rel", 0.01, 2)'],
  ['filter_all32', 'Prices.filter(p, p > 100.0).all(p, p < 200.0)']
]

function time (fn) {
  let n = 0
  const batch = 10000
  const t0 = process.hrtime.bigint()
  let t1
  do {
    for (let i = 0; i < batch; i++) fn()
    n += batch
    t1 = process.hrtime.bigint()
  } while (Number(t1 - t0) / 1e9 < secs)
  return n / (Number(t1 - t0) / 1e9)
}

const env = new Environment({unlistedVariablesAreDyn: true})
  .registerFunction('abs(double): double', x => Math.abs(x))
  .registerFunction('quorum(list, string, double, int): bool', quorum)

console.log(`${'engine'.padEnd(22)} ${'case'.padEnd(13)} ${'compile_us'.padStart(11)} ${'evals_per_s'.padStart(13)}  result`)
for (const [name, expr] of cases) {
  // @marcbachmann/cel-js
  let t0 = process.hrtime.bigint()
  let prog
  for (let i = 0; i < 2000; i++) prog = env.parse(expr)
  const cus = Number(process.hrtime.bigint() - t0) / 2000 / 1e3
  const res = prog(ctx)
  const rate = time(() => prog(ctx))
  console.log(`${'@marcbachmann/cel-js'.padEnd(22)} ${name.padEnd(13)} ${cus.toFixed(2).padStart(11)} ${rate.toFixed(0).padStart(13)}  ${res}`)
  // cel-js
  const fns = {abs: x => Math.abs(x), quorum}
  t0 = process.hrtime.bigint()
  let pr
  for (let i = 0; i < 200; i++) pr = celjs.parse(expr)
  const cus2 = Number(process.hrtime.bigint() - t0) / 200 / 1e3
  if (!pr.isSuccess) { console.log(`cel-js ${name}: parse failed ${pr.errors}`); continue }
  let res2
  try { res2 = celjs.evaluate(pr.cst, ctxPlain, fns) } catch (e) { console.log(`cel-js ${name}: ${e.message}`); continue }
  const rate2 = time(() => celjs.evaluate(pr.cst, ctxPlain, fns))
  console.log(`${'cel-js'.padEnd(22)} ${name.padEnd(13)} ${cus2.toFixed(2).padStart(11)} ${rate2.toFixed(0).padStart(13)}  ${res2}`)
}
