// The JS suite's runner: `node --test` on an explicit list of test files.
//
//   node scripts/test.mjs [node --test options] [FILE_OR_DIR ...]
//
// With no path, every *.test.mjs under __test__/; a path narrows the run to
// that file, or to the test files under that directory. Options (anything
// starting with `-`) go to `node --test` before the files. It runs under
// the Node that runs it (process.execPath), one file at a time.
//
// Why not `node --test __test__/`: Node 22 and 24 refuse a directory
// argument ("Cannot find module '.../__test__'", nodejs/node#64555), and a
// glob such as '__test__/**/*.test.mjs' means nothing to Node 20. A list
// of files is the one form every supported Node accepts.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Every *.test.mjs under `dir`, sorted, as paths relative to the repository. */
function testFiles(dir) {
  const found = [];
  const walk = (d) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules') walk(path);
      } else if (entry.name.endsWith('.test.mjs')) {
        found.push(relative(root, path));
      }
    }
  };
  walk(dir);
  return found.sort();
}

const options = [];
const paths = [];
for (const arg of process.argv.slice(2)) (arg.startsWith('-') ? options : paths).push(arg);

const files = [];
for (const p of paths.length > 0 ? paths : ['__test__']) {
  const abs = resolve(p);
  let st;
  try {
    st = statSync(abs);
  } catch {
    console.error(`scripts/test.mjs: no such file or directory: ${p}`);
    process.exit(2);
  }
  files.push(...(st.isDirectory() ? testFiles(abs) : [relative(root, abs)]));
}
if (files.length === 0) {
  console.error(`scripts/test.mjs: no *.test.mjs under ${paths.join(' ')}`);
  process.exit(2);
}

const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...options, ...files], {
  cwd: root,
  stdio: 'inherit',
});
if (r.error) {
  console.error(`scripts/test.mjs: ${process.execPath}: ${r.error.message}`);
  process.exit(1);
}
process.exit(r.status ?? 1);
