// npm start: open a SQLite file, ensure a schema, push two commits through
// a transaction the way @syncular/server does, then read them back through
// a commit window and a scope scan.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const { NativeStorage } = require('../index.js');

// A CompiledSchema as the host passes it (Maps and Sets included).
const schema = {
  version: 1,
  declaredVariables: new Set(['project_id']),
  tables: new Map([
    [
      'tasks',
      {
        name: 'tasks',
        columns: [
          { name: 'id', type: 'string', nullable: false },
          { name: 'project_id', type: 'string', nullable: false },
          { name: 'title', type: 'string', nullable: true },
        ],
        primaryKeyIndex: 0,
        scopePatterns: [{ variable: 'project_id', prefix: 'project', column: 'project_id', columnIndex: 1 }],
        indexes: [{ name: 'tasks_by_title', columns: ['title'] }],
        materialize: true,
      },
    ],
  ]),
};

// Row payloads use the Syncular row codec: a null bitmap, then each
// non-null value (strings as u32 length + UTF-8).
function encodeTask(id, projectId, title) {
  const parts = [Buffer.from([title === null ? 0b100 : 0])];
  for (const s of [id, projectId, title]) {
    if (s === null) continue;
    const bytes = Buffer.from(s, 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32LE(bytes.length);
    parts.push(len, bytes);
  }
  return new Uint8Array(Buffer.concat(parts));
}

async function pushCommit(storage, partition, clientCommitId, tasks) {
  const tx = await storage.begin(partition);
  try {
    await tx.lockPartitionForPush();
    const changes = [];
    for (const [i, task] of tasks.entries()) {
      const before = await tx.getRow('tasks', task.id);
      const serverVersion = (before?.serverVersion ?? 0) + 1;
      const scopes = { project_id: task.projectId };
      const payload = encodeTask(task.id, task.projectId, task.title);
      await tx.upsertRow('tasks', { rowId: task.id, serverVersion, scopes, payload }, { opIndex: i });
      changes.push({ table: 'tasks', rowId: task.id, op: 'upsert', rowVersion: serverVersion, scopes, payload });
    }
    const commitSeq = await tx.appendCommit({
      clientId: 'quickstart-client',
      clientCommitId,
      actorId: 'alice',
      createdAtMs: Date.now(),
      changes,
    });
    await tx.putPushResult('quickstart-client', clientCommitId, {
      status: 'applied',
      commitSeq,
      recordedAtMs: Date.now(),
      results: tasks.map((_, opIndex) => ({ opIndex, status: 'applied' })),
    });
    await tx.commit();
    return commitSeq;
  } catch (err) {
    await tx.rollback();
    throw err;
  }
}

const dir = mkdtempSync(join(tmpdir(), 'syncular-quickstart-'));
const file = join(dir, 'sync.db');
const storage = new NativeStorage({ url: `sqlite:${file}` });
try {
  await storage.ensureSchema(schema);
  const entry = await storage.touchPartition('demo', Date.now(), 'epoch-1');
  console.log(`opened ${file}; partition "${entry.partition}" at log epoch ${entry.logEpoch}`);

  const first = await pushCommit(storage, 'demo', 'commit-1', [
    { id: 't1', projectId: 'p1', title: 'write the README' },
    { id: 't2', projectId: 'p1', title: null },
  ]);
  const second = await pushCommit(storage, 'demo', 'commit-2', [
    { id: 't2', projectId: 'p1', title: 'ship it' },
    { id: 't3', projectId: 'p2', title: 'other project' },
  ]);
  console.log(`pushed commits ${first} and ${second}`);

  const window = await storage.readCommitWindow('demo', {
    table: 'tasks',
    scopeFilter: { project_id: ['p1'] },
    afterSeq: 0,
    throughSeq: await storage.getMaxCommitSeq('demo'),
    limitChanges: 100,
  });
  for (const commit of window) {
    const ids = commit.changes.map((c) => `${c.op} ${c.rowId}@v${c.rowVersion}`).join(', ');
    console.log(`window: commit ${commit.commitSeq} by ${commit.actorId}: ${ids}`);
  }

  const rows = await storage.scanRows('demo', {
    table: 'tasks',
    scopeFilter: { project_id: ['p1'] },
    afterRowId: null,
    limit: 50,
  });
  console.log(`scan project p1: ${rows.map((r) => `${r.rowId} v${r.serverVersion} (${r.payload.length} bytes)`).join(', ')}`);

  const replay = await storage.getPushResult('demo', 'quickstart-client', 'commit-1');
  console.log(`idempotency record for commit-1: ${replay.status} at commitSeq ${replay.commitSeq}`);
} finally {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
}
