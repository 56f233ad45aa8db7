// Reads the Rust sources' imports and checks the plan of the tree
// (issue 49): no module cycle between files, no arrow that runs back up
// the layers, no source file (Rust, or the JS surface: lib/, bin/,
// index.js) over the size a newcomer reads in one sitting,
// and every file named in docs/architecture.md.
//
//   node scripts/layers.mjs            report
//   node scripts/layers.mjs --check    report, and exit 1 on anything new (a file
//                                      docs/architecture.md does not name included)
//
// An edge is any `crate::…`, `super::…` or `self::…` path, or a path
// through a child module a file declares (`mod x;` then `x::…`), resolved
// to the deepest file module it names. A folder's `mod.rs` is its face: its
// `mod x;` and `pub use x::…` lines are not edges, and a name it only
// re-exports resolves to the child that defines it.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

// --repo DIR reads another tree (the tests give it a small one).
const repoArg = process.argv.indexOf('--repo');
const repo = repoArg > 0 ? process.argv[repoArg + 1] : join(dirname(fileURLToPath(import.meta.url)), '..');
const root = join(repo, 'src');

// The layers, lowest first: a module may use its own layer's and lower
// ones' modules only. The two engines sit side by side and never use each
// other.
const LAYERS = [
  ['core', ['core']],
  ['seam', ['seam']],
  ['engines', ['sqlite', 'postgres']],
  ['open', ['open', 'copy']],
  ['binding', ['napi']],
];
const SIDE_BY_SIDE = [['sqlite', 'postgres']];
// Lines a source file may hold (tests excepted).
const MAX_LINES = 800;
// Cycles known when the check landed, each to be taken apart (issue 49);
// written as the sorted members of the cycle. Anything else fails --check.
const KNOWN_CYCLES = [];
const KNOWN_LARGE = new Set([]);

const files = [];
const walk = (d) => {
  for (const f of readdirSync(d).sort()) {
    const p = join(d, f);
    if (statSync(p).isDirectory()) walk(p);
    else if (p.endsWith('.rs')) files.push(p);
  }
};
walk(root);

const isFace = (f) => f.endsWith('/mod.rs') || f.endsWith('/lib.rs');
const moduleOf = (f) => {
  const r = relative(root, f).replace(/\.rs$/, '').replace(/(^|\/)mod$/, '');
  return r === 'lib' ? 'crate' : `crate::${r.replaceAll('/', '::')}`;
};
const parentOf = (m) => m.split('::').slice(0, -1).join('::');
const modules = new Map(files.map((f) => [moduleOf(f), f]));
const isTest = (m) => /(^|::)tests?$|_tests$/.test(m);

// Comments and string literals say nothing about imports.
const code = (f) =>
  readFileSync(f, 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/[^\n]*/g, '')
    .replace(/r#*"[\s\S]*?"#*/g, '""')
    .replace(/"(?:\\.|[^"\\])*"/g, '""');

// What each face re-exports: name -> child module.
const reexports = new Map();
for (const [m, f] of modules) {
  if (!isFace(f)) continue;
  const names = new Map();
  for (const u of code(f).matchAll(/\bpub(?:\([^)]*\))?\s+use\s+(?:self::)?([a-z_0-9]+)::(\{[^}]*\}|[A-Za-z_0-9]+)\s*;/g)) {
    const child = `${m}::${u[1]}`;
    if (!modules.has(child)) continue;
    for (const n of u[2].replace(/[{}]/g, '').split(',')) {
      const name = n.trim().split(/\s+as\s+/).pop();
      if (name) names.set(name, child);
    }
  }
  reexports.set(m, names);
}

const resolve = (base, parts) => {
  let best = modules.has(base) ? base : null;
  let cur = base;
  let i = 0;
  for (; i < parts.length; i += 1) {
    const next = `${cur}::${parts[i]}`;
    if (!modules.has(next)) break;
    cur = next;
    best = cur;
  }
  // A name the face only re-exports belongs to the child defining it.
  const name = parts[i];
  if (best && name && reexports.get(best)?.has(name)) return reexports.get(best).get(name);
  return best;
};

const edges = new Map();
for (const [m, f] of modules) {
  // Facade lines are not uses.
  const src = code(f).replace(/\bpub(?:\([^)]*\))?\s+use\s+(?:self::)?[a-z_0-9]+::[^;]*;/g, isFace(f) ? '' : '$&');
  const self = m;
  const out = new Set();
  const here = isFace(f) ? self : parentOf(self);
  for (const x of src.matchAll(/\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)/g)) {
    const parts = x[2].split('::').filter(Boolean);
    let base = x[1] === 'crate' ? 'crate' : x[1] === 'self' ? self : isFace(f) ? parentOf(self) : here;
    if (x[1] === 'self' && !isFace(f)) base = self;
    while (parts[0] === 'super') {
      base = parentOf(base);
      parts.shift();
    }
    const to = resolve(base, parts);
    if (to && to !== self) out.add(to);
  }
  // Grouped imports: `use super::{a, b::C}` names each part.
  for (const g of src.matchAll(/\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^{}]*)\}/g)) {
    let base = g[1] === 'crate' ? 'crate' : g[1] === 'self' ? self : isFace(f) ? parentOf(self) : here;
    const prefix = g[2].split('::').filter(Boolean);
    while (prefix[0] === 'super') {
      base = parentOf(base);
      prefix.shift();
    }
    for (const item of g[3].split(',')) {
      const parts = [...prefix, ...item.trim().split(/\s+as\s+/)[0].split('::').filter((p) => p && p !== 'self')];
      const to = resolve(base, parts);
      if (to && to !== self) out.add(to);
    }
  }
  for (const c of src.matchAll(/\bmod\s+([a-z_0-9]+)\s*;/g)) {
    const child = `${self}::${c[1]}`;
    if (modules.has(child) && new RegExp(`(?<![:\\w])${c[1]}::`).test(src.replace(/\bmod\s+[a-z_0-9]+\s*;/g, ''))) out.add(child);
  }
  edges.set(m, out);
}

// Cycles: strongly connected components of more than one file (tests out).
const sccs = [];
{
  let next = 0;
  const stack = [];
  const on = new Set();
  const index = new Map();
  const low = new Map();
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v) ?? []) {
      if (isTest(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const c = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1) sccs.push(c.sort().join(' '));
    }
  };
  for (const v of modules.keys()) if (!isTest(v) && !index.has(v)) visit(v);
}

const layerOf = (m) => {
  const top = m.split('::')[1];
  const i = LAYERS.findIndex(([, tops]) => tops.includes(top));
  return i < 0 ? null : i;
};
const upward = [];
const unplaced = new Set();
for (const [from, tos] of edges) {
  if (isTest(from) || from === 'crate') continue;
  const lf = layerOf(from);
  if (lf === null) unplaced.add(from.split('::')[1]);
  for (const to of tos) {
    if (to === 'crate' || isTest(to)) continue;
    const lt = layerOf(to);
    const [a, b] = [from.split('::')[1], to.split('::')[1]];
    const sideways = SIDE_BY_SIDE.some((pair) => pair.includes(a) && pair.includes(b) && a !== b);
    if ((lf !== null && lt !== null && lt > lf) || sideways) upward.push(`${from} -> ${to}`);
  }
}

const large = [];
const countLines = (f) => readFileSync(f, 'utf8').split('\n').length - 1;
for (const [m, f] of modules) {
  if (isTest(m)) continue;
  const lines = countLines(f);
  if (lines > MAX_LINES) large.push([relative(repo, f), lines]);
}
// The JS surface is held to the same size: lib/ and the package's entry and command.
const jsFiles = [];
const walkJs = (d) => {
  let entries;
  try {
    entries = readdirSync(d).sort();
  } catch {
    return;
  }
  for (const f of entries) {
    const p = join(d, f);
    if (statSync(p).isDirectory()) walkJs(p);
    else if (/\.(c|m)?js$/.test(p)) jsFiles.push(p);
  }
};
for (const d of ['lib', 'bin']) walkJs(join(repo, d));
for (const f of ['index.js']) {
  try {
    statSync(join(repo, f));
    jsFiles.push(join(repo, f));
  } catch {}
}
for (const f of jsFiles) {
  const lines = countLines(f);
  if (lines > MAX_LINES) large.push([relative(repo, f), lines]);
}
let architecture = '';
try {
  architecture = readFileSync(join(repo, 'docs/architecture.md'), 'utf8');
} catch {}
const unnamed = files.map((f) => relative(repo, f)).filter((f) => !architecture.includes(f) && !architecture.includes(f.replace(/^src\//, '')));

const known = new Set(KNOWN_CYCLES);
const newCycles = sccs.filter((c) => !known.has(c));
const newLarge = large.filter(([f]) => !KNOWN_LARGE.has(f));
console.log(`modules: ${modules.size}, edges: ${[...edges.values()].reduce((n, s) => n + s.size, 0)}`);
console.log(`cycles: ${sccs.length} (${newCycles.length} not in the known list)`);
for (const c of sccs) console.log(`  ${known.has(c) ? 'known' : 'NEW  '} ${c}`);
for (const c of KNOWN_CYCLES.filter((c) => !sccs.includes(c))) console.log(`  gone  ${c} (take it off KNOWN_CYCLES)`);
console.log(`arrows up the layers or across the engines: ${upward.length}`);
for (const u of upward) console.log(`  ${u}`);
if (unplaced.size) console.log(`top-level modules in no layer: ${[...unplaced].join(', ')}`);
console.log(`files over ${MAX_LINES} lines: ${large.length}`);
for (const [f, n] of large) console.log(`  ${KNOWN_LARGE.has(f) ? 'known' : 'NEW  '} ${f} ${n}`);
console.log(`files docs/architecture.md does not name: ${unnamed.length}`);
// --edges m1,m2: what those modules use (to take a cycle apart).
const asked = process.argv[process.argv.indexOf('--edges') + 1];
if (process.argv.includes('--edges') && asked) for (const m of asked.split(',')) console.log(`${m} -> ${[...(edges.get(m) ?? [])].join(' ')}`);
for (const f of unnamed) console.log(`  ${f}`);

if (process.argv.includes('--check')) {
  const failed = newCycles.length + upward.length + unplaced.size + newLarge.length + (architecture ? unnamed.length : 0);
  if (failed) {
    console.error(`layers: ${failed} problem(s) beyond the known ones`);
    process.exit(1);
  }
}
