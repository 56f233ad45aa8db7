#!/usr/bin/env node
// The package's command (issue 51, docs/copy.md):
//
//   syncular-native-storage copy FROM TO [--schema S] [--verify] [--verify-only] [--resume]
//                                        [--final [--lock-timeout-ms N]]
//   syncular-native-storage moved FILE [--clear]
//
// copy: copies the SQLite database FROM (sqlite:./sync.db, or a path) into
// the PostgreSQL database TO (postgres://…), or with --verify-only only
// compares them; --resume continues a copy that was interrupted (or the
// one made while the host was still writing) from where the target says
// it stands, with catch-up passes. --final ends the move while the host
// serves: it copies (or resumes), catches up, then takes the file's write
// lock, copies the rest and marks the file moved, so every later write to
// it, in any process, is refused with ERR_SYNCULAR_MOVED until the host
// switches to TO (docs/copy.md). The other way round, FROM postgres://…
// and TO a new SQLite file, it copies one consistent snapshot of the
// PostgreSQL schema (a backup, a test fixture; --resume and --final are
// refused). --schema names the PostgreSQL side's schema either way.
// moved: prints the mark a move left in FILE; --clear removes it (moving
// back to SQLite).
// Progress goes to stderr (a bar on a terminal, a line a second
// otherwise); the report goes to stdout as JSON. Exit codes: 0 done (and
// equal when verified), 1 a verify found a difference, 2 bad usage, 3 the
// copy failed (the error's code is printed).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const USAGE = [
  'usage: syncular-native-storage copy FROM TO [--schema S] [--verify] [--verify-only] [--resume] [--final [--lock-timeout-ms N]]',
  '       syncular-native-storage moved FILE [--clear]',
].join('\n');

function parse(argv) {
  const [command, ...rest] = argv;
  if (command === 'moved') {
    const files = rest.filter((a) => !a.startsWith('--'));
    const flags = rest.filter((a) => a.startsWith('--'));
    if (files.length !== 1 || flags.some((f) => f !== '--clear')) return null;
    return { command, positional: files, clear: flags.includes('--clear') };
  }
  if (command !== 'copy') return null;
  const out = { command, positional: [], schema: undefined, verify: false, verifyOnly: false, resume: false, final: false, lockTimeoutMs: undefined };
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    if (a === '--schema') {
      out.schema = rest[++i];
      if (!out.schema) return null;
    } else if (a.startsWith('--schema=')) out.schema = a.slice('--schema='.length);
    else if (a === '--verify') out.verify = true;
    else if (a === '--verify-only') out.verifyOnly = true;
    else if (a === '--resume') out.resume = true;
    else if (a === '--final') out.final = true;
    else if (a === '--lock-timeout-ms') {
      out.lockTimeoutMs = Number(rest[++i]);
      if (!Number.isInteger(out.lockTimeoutMs) || out.lockTimeoutMs < 0) return null;
    } else if (a.startsWith('--')) return null;
    else out.positional.push(a);
  }
  if (out.final && out.verifyOnly) return null;
  return out.positional.length === 2 ? out : null;
}

function drawer() {
  const tty = process.stderr.isTTY;
  let last = 0;
  return (p) => {
    const now = Date.now();
    if (!tty && now - last < 1000) return;
    last = now;
    const pct = p.rowsTotal > 0 ? Math.min(100, Math.floor((p.rows / p.rowsTotal) * 100)) : 0;
    const eta = p.etaMs > 0 ? `${Math.ceil(p.etaMs / 1000)}s left` : '';
    const rate = `${p.rowsPerSec} rows/s ${p.mbPerSec} MB/s`;
    if (tty) {
      const width = 30;
      const fill = Math.round((pct / 100) * width);
      const bar = '#'.repeat(fill) + '-'.repeat(width - fill);
      process.stderr.write(`\r${p.phase} [${bar}] ${pct}% ${p.rows}/${p.rowsTotal} ${p.table} ${rate} ${eta}\x1b[K`);
    } else {
      process.stderr.write(`${p.phase} ${p.table} ${p.rows}/${p.rowsTotal} rows ${rate} ${eta}\n`);
    }
  };
}

async function main() {
  const args = parse(process.argv.slice(2));
  if (args === null) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const { copyStorage, movedMark } = require('../index.js');
  if (args.command === 'moved') {
    try {
      process.stdout.write(`${JSON.stringify(await movedMark(args.positional[0], { clear: args.clear }), null, 2)}\n`);
      return 0;
    } catch (err) {
      process.stderr.write(`moved failed: ${err.code ?? 'ERR'}: ${err.message}\n`);
      return 3;
    }
  }
  const [from, to] = args.positional;
  let report;
  try {
    report = await copyStorage(from, to, {
      schema: args.schema,
      verify: args.verify,
      verifyOnly: args.verifyOnly,
      resume: args.resume,
      finalPass: args.final,
      lockTimeoutMs: args.lockTimeoutMs,
      onProgress: drawer(),
    });
  } catch (err) {
    if (process.stderr.isTTY) process.stderr.write('\n');
    process.stderr.write(`copy failed: ${err.code ?? 'ERR'}: ${err.message}\n`);
    return 3;
  }
  if (process.stderr.isTTY) process.stderr.write('\n');
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  const verified = args.verifyOnly ? report : report.verify;
  if (verified && !verified.equal) {
    const d = verified.firstDifference;
    process.stderr.write(`verify: first difference in ${d.table}, partition ${JSON.stringify(d.partition)}: ${d.kind} at ${JSON.stringify(d.key)}\n`);
    return 1;
  }
  return 0;
}

process.exitCode = await main();
