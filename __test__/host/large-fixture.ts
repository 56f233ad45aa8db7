// Checks scripts/large-fixture.mjs against upstream (issue 48), and swaps
// in and back on a large file it made, through upstream's own handler.
//
//   bun large-fixture.ts check <dir> <commits> <partitions> <rows> [<bootRows>]
//     The generator writes <dir>/gen.db (with its `boot` partition of
//     <bootRows> rows when given); upstream's handler over the
//     in-tree storage applies the same pushes (same clock, same
//     cacheIdentity) to <dir>/handler.db. Compared: the file's settings,
//     sqlite_master, every table's contents, and pull answers through the
//     in-tree storage on both files and through this package on a copy of
//     the generated one.
//   bun large-fixture.ts swap <file>
//     Pull answers through the in-tree storage, then through this package
//     (its first ensureSchema repairs the layout), then through the in-tree
//     storage again: compared byte for byte.
//
// Prints one JSON line with what it found.
import { Database } from 'bun:sqlite';
import { copyFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BASE_MS, BOOT_PARTITION, history, partitionName, PROJECTS, serverSchema, WIRE_VERSION, writeLargeFixture } from '../../scripts/large-fixture.mjs';
import { core, native, report, server } from './upstream.ts';

const [mode, ...args] = process.argv.slice(2);
const ALLOWED = {
  project_id: Array.from({ length: PROJECTS }, (_, i) => `proj${i}`),
  owner_id: Array.from({ length: 7 }, (_, i) => `u${i}`),
};
const wireVersion = WIRE_VERSION;

function ctxFor(storage: any, partition: string, actorId: string, clock: number) {
  return {
    partition,
    actorId,
    schema: serverSchema,
    storage,
    segments: new server.MemorySegmentStore(),
    resolveScopes: () => ALLOWED,
    clock: () => clock,
  };
}

function request(clientId: string, partition: string, frames: unknown[]) {
  return core.encodeMessage({
    wireVersion,
    msgKind: 'request',
    frames: [{ type: 'REQ_HEADER', clientId, schemaVersion: serverSchema.version, logEpoch: `epoch-${partition}` }, ...frames],
  });
}

async function close(storage: any) {
  if (typeof storage.close === 'function') await storage.close();
  else storage.db?.close?.();
}

/** Pull answers: windows at several cursors and limits, then bootstraps followed to their end. */
async function answers(storage: any, partitions: string[]) {
  const out: Uint8Array[] = [];
  for (const partition of partitions) {
    const ctx = ctxFor(storage, partition, 'puller', BASE_MS + 1e9);
    const max = Number(await storage.getMaxCommitSeq(partition));
    const sub = (table: string, project: string, cursor: number, state?: unknown) => ({
      type: 'SUBSCRIPTION',
      id: `${table}-${project}`,
      table,
      scopes: { project_id: [project] },
      cursor,
      ...(state !== undefined ? { bootstrapState: state } : {}),
    });
    const header = (limitCommits: number) => ({ type: 'PULL_HEADER', limitCommits, limitSnapshotRows: 50, maxSnapshotPages: 2, accept: 0b0011 });
    for (const cursor of [0, 1, Math.floor(max / 2), max - 1, max]) {
      for (const limit of [1, 100]) {
        const bytes = await server.handleSyncRequest(request('puller', partition, [header(limit), sub('tasks', 'proj1', cursor), sub('notes', 'proj2', cursor), sub('audit', 'proj3', cursor)]), ctx);
        out.push(bytes);
      }
    }
    for (const [table, project] of [['tasks', 'proj1'], ['notes', 'proj2']]) {
      let state: unknown;
      for (let page = 0; page < 200; page++) {
        const bytes = await server.handleSyncRequest(request('bootstrapper', partition, [header(100), sub(table, project, -1, state)]), ctx);
        out.push(bytes);
        const frames = core.decodeMessage(bytes).frames;
        state = frames.find((f: any) => f.bootstrapState !== undefined && f.bootstrapState !== null)?.bootstrapState;
        if (state === undefined) break;
      }
    }
  }
  for (const b of out) {
    const error = core.decodeMessage(b).frames.find((f: any) => f.type === 'ERROR');
    if (error) throw new Error(`pull answered ${error.code}: ${error.message}`);
  }
  return out;
}

function compare(step: string, a: Uint8Array[], b: Uint8Array[]) {
  let firstDiff: number | undefined;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (!x || !y || Buffer.compare(Buffer.from(x), Buffer.from(y)) !== 0) {
      firstDiff = i;
      break;
    }
  }
  return { step, answers: a.length, bytes: a.reduce((n, x) => n + x.length, 0), identical: firstDiff === undefined, ...(firstDiff !== undefined ? { firstDiff } : {}) };
}

/** Everything of a file that the comparison covers, as plain values. */
function dump(path: string) {
  const db = new Database(path, { readonly: true });
  const cell = (v: unknown) => (v instanceof Uint8Array ? `x'${Buffer.from(v).toString('hex')}'` : v);
  const master = db.query('SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid').all() as any[];
  const tables: Record<string, string[]> = {};
  for (const m of master) {
    if (m.type !== 'table') continue;
    const cols = (db.query(`SELECT name FROM pragma_table_info('${m.name}')`).all() as any[]).map((c) => `"${c.name}"`);
    tables[m.name] = (db.query(`SELECT * FROM "${m.name}" ORDER BY ${cols.join(', ')}`).values() as unknown[][]).map((r) => JSON.stringify(r.map(cell)));
  }
  const pragmas: Record<string, unknown> = {};
  for (const p of ['journal_mode', 'page_size', 'user_version', 'auto_vacuum', 'encoding', 'application_id']) {
    pragmas[p] = Object.values(db.query(`PRAGMA ${p}`).get() as object)[0];
  }
  db.close();
  return { master, tables, pragmas };
}

function diff(a: ReturnType<typeof dump>, b: ReturnType<typeof dump>) {
  const out: unknown[] = [];
  if (JSON.stringify(a.pragmas) !== JSON.stringify(b.pragmas)) out.push({ pragmas: [a.pragmas, b.pragmas] });
  if (JSON.stringify(a.master) !== JSON.stringify(b.master)) out.push({ master: [a.master, b.master] });
  for (const name of new Set([...Object.keys(a.tables), ...Object.keys(b.tables)])) {
    const x = a.tables[name] ?? [];
    const y = b.tables[name] ?? [];
    const i = x.findIndex((r, k) => r !== y[k]);
    if (x.length !== y.length || i >= 0) out.push({ table: name, rows: [x.length, y.length], first: i >= 0 ? [x[i], y[i]] : [x[y.length], y[x.length]] });
  }
  return out;
}

if (mode === 'check') {
  const [dir, commitsArg, partitionsArg, rowsArg, bootArg] = args;
  const opts = { commits: Number(commitsArg), partitions: Number(partitionsArg), rows: Number(rowsArg), bootRows: Number(bootArg ?? 0), seed: 7 };
  const partitions = Array.from({ length: opts.partitions }, (_, i) => partitionName(i));
  if (opts.bootRows > 0) partitions.push(BOOT_PARTITION);
  const generated = join(dir, 'gen.db');
  const written = join(dir, 'handler.db');
  const made = await writeLargeFixture(generated, opts);
  for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(written + suffix, { force: true });

  // The same pushes through upstream's handler over the in-tree storage.
  let storage: any = new server.SqliteServerStorage(written);
  await storage.ensureSchema(server.compileSchema(serverSchema));
  for (const p of partitions) await storage.touchPartition(p, BASE_MS, `epoch-${p}`);
  const uuid = globalThis.crypto.randomUUID;
  let identity = '';
  globalThis.crypto.randomUUID = (() => identity) as any;
  for (const c of history(opts)) {
    identity = c.cacheIdentity;
    const bytes = await server.handleSyncRequest(
      request(c.clientId, c.partition, [{ type: 'PUSH_COMMIT', clientCommitId: c.clientCommitId, operations: c.ops.map((o: any) => (o.payload ? { ...o, payload: new Uint8Array(o.payload) } : o)) }]),
      ctxFor(storage, c.partition, c.actorId, c.createdAtMs),
    );
    const frames = core.decodeMessage(bytes).frames;
    const result = frames.find((f: any) => f.type === 'PUSH_RESULT');
    if (result?.status !== 'applied' || result.commitSeq !== c.seq) {
      throw new Error(`push ${c.partition}/${c.seq} answered ${JSON.stringify(frames)}`);
    }
  }
  globalThis.crypto.randomUUID = uuid;
  await close(storage);

  const differences = diff(dump(generated), dump(written));
  const forOurs = join(dir, 'ours.db');
  copyFileSync(generated, forOurs);
  storage = new server.SqliteServerStorage(written);
  await storage.ensureSchema(server.compileSchema(serverSchema));
  const byHandler = await answers(storage, partitions);
  await close(storage);
  storage = new server.SqliteServerStorage(generated);
  await storage.ensureSchema(server.compileSchema(serverSchema));
  const byGenerator = await answers(storage, partitions);
  await close(storage);
  storage = native.createStorage({ url: `sqlite:${forOurs}`, errors: server });
  await server.ensureSyncServerReady({ schema: serverSchema, storage });
  const byOurs = await answers(storage, partitions);
  await close(storage);
  report({
    ok: differences.length === 0,
    made,
    differences,
    pulls: [compare('in-tree: handler-written vs generated', byHandler, byGenerator), compare('handler-written (in-tree) vs generated (ours)', byHandler, byOurs)],
  });
} else if (mode === 'swap') {
  const [file] = args;
  const partitions = ['part-000', 'part-017', 'part-049'];
  let storage: any = new server.SqliteServerStorage(file);
  await server.ensureSyncServerReady({ schema: serverSchema, storage });
  const before = await answers(storage, partitions);
  await close(storage);

  storage = native.createStorage({ url: `sqlite:${file}`, errors: server });
  const started = performance.now();
  await server.ensureSyncServerReady({ schema: serverSchema, storage });
  const ensureMs = Math.round(performance.now() - started);
  const ours = await answers(storage, partitions);
  await close(storage);

  storage = new server.SqliteServerStorage(file);
  await server.ensureSyncServerReady({ schema: serverSchema, storage });
  const back = await answers(storage, partitions);
  await close(storage);
  report({ ok: true, ensureMs, steps: [compare('in-tree → ours', before, ours), compare('ours → in-tree', ours, back)] });
} else {
  throw new Error('usage: bun large-fixture.ts check <dir> <commits> <partitions> <rows> [<bootRows>] | swap <file>');
}
