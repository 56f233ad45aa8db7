// npm's `prepare` hook: runs on `npm install` in a clone (and for git
// dependencies), never when the published tarball is installed, so users of
// the tarball never compile anything. It builds the addon from the Rust
// sources into native/, unless a build there is already newer than every
// source file. Without the sources or @napi-rs/cli (a devDependency) there
// is nothing to build and it does nothing.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const say = (msg) => console.log(`syncular-native-storage prepare: ${msg}`);

/** The @napi-rs/cli entry point, or undefined when devDependencies are absent. */
function napiCli() {
  try {
    const require = createRequire(join(root, 'package.json'));
    const manifest = require.resolve('@napi-rs/cli/package.json');
    const bin = JSON.parse(readFileSync(manifest, 'utf8')).bin;
    const rel = typeof bin === 'string' ? bin : bin?.napi;
    return rel === undefined ? undefined : join(dirname(manifest), rel);
  } catch {
    return undefined;
  }
}

function newestMtime(path) {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = 0;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

const sources = ['Cargo.toml', 'Cargo.lock', 'build.rs', 'src'].map((p) => join(root, p));
const cli = napiCli();
if (!sources.every(existsSync) || cli === undefined) {
  say('no Rust sources or no @napi-rs/cli here: nothing to build');
  process.exit(0);
}

const local = join(root, 'native', `${pkg.napi.binaryName}.node`);
if (existsSync(local) && statSync(local).mtimeMs >= Math.max(...sources.map(newestMtime))) {
  say(`${local} is newer than the Rust sources; not rebuilding (\`npm run build\` forces a build)`);
  process.exit(0);
}

if (spawnSync('cargo', ['--version'], { stdio: 'ignore' }).error) {
  say('cargo is not on PATH, so the addon cannot be built from source.');
  say('Install Rust (https://rustup.rs), then run `npm run build`.');
  process.exit(1);
}

// The same command as `npm run build`, so the two cannot drift apart.
const [tool, ...args] = pkg.scripts.build.split(/\s+/);
if (tool !== 'napi') throw new Error(`scripts.build must start with napi, found ${tool}`);
say(`building the addon from source (napi ${args.join(' ')})`);
const run = spawnSync(process.execPath, [cli, ...args], { cwd: root, stdio: 'inherit' });
process.exit(run.status ?? 1);
