// The plan of the tree (issue 49): scripts/layers.mjs reads the Rust
// sources' imports and fails on a module cycle or an arrow up the layers
// beyond the ones it lists as known. Here: the real tree passes, and a
// small tree with a cycle and an engine using the other is caught.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'scripts', 'layers.mjs');
const run = (...args) => spawnSync(process.execPath, [script, '--check', ...args], { encoding: 'utf8' });

test('the source tree has no new cycle and no arrow up the layers', () => {
  const r = run();
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /arrows up the layers or across the engines: 0/);
});

test('a cycle between files, an engine using the other engine and a JS file over the size are caught', () => {
  const repo = mkdtempSync(join(tmpdir(), 'layers-'));
  try {
    const put = (p, text) => {
      mkdirSync(dirname(join(repo, p)), { recursive: true });
      writeFileSync(join(repo, p), text);
    };
    put('src/lib.rs', 'pub mod seam;\npub mod sqlite;\npub mod postgres;\n');
    put('src/seam.rs', 'pub trait Engine {}\n');
    put('src/sqlite/mod.rs', 'mod a;\nmod b;\nmod c;\npub fn f() { a::g() }\n');
    put('src/sqlite/a.rs', 'pub fn g() { super::b::h() }\n');
    put('src/sqlite/b.rs', 'use super::{a, c::D};\npub fn h() { a::g(); crate::postgres::k() }\n');
    put('src/sqlite/c.rs', 'pub struct D;\n');
    put('src/postgres/mod.rs', 'pub fn k() { let _ = "crate::sqlite::f"; }\n');
    // The JS surface is held to the Rust files' size.
    put('lib/members/big.js', '// x\n'.repeat(801));
    put('lib/small.js', '// x\n'.repeat(800));
    const r = run('--repo', repo);
    assert.equal(r.status, 1, r.stdout);
    assert.match(r.stdout, /NEW {3}crate::sqlite::a crate::sqlite::b/);
    assert.match(r.stdout, /crate::sqlite::b -> crate::postgres/);
    assert.match(r.stdout, /NEW {3}lib\/members\/big\.js 801/);
    assert.doesNotMatch(r.stdout, /lib\/small\.js/);
    // Paths inside strings and comments are not uses.
    assert.doesNotMatch(r.stdout, /crate::postgres -> crate::sqlite/);
  } finally {
    rmSync(repo, { recursive: true, force: true });
  }
});
