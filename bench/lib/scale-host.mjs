// The host figures of bench/scale.mjs on a database made by
// scripts/large-fixture.mjs: upstream's handler over the fixture's own
// schema (tasks, notes, audit; scopes by project and owner), requests
// built with the @syncular/core codec the server entry resolves. Each
// figure checks its answers as lib/server.mjs's do.
import { encodeRow, PROJECTS, serverSchema } from '../../scripts/large-fixture.mjs';
import { bootstrapPages, bootstrapRows, checkWindowPulls } from './server.mjs';

const now = () => Number(process.hrtime.bigint()) / 1e3; // µs
const ACTOR = 'scale-actor';
const ACCEPT_ROWS = 0b0011;
// Every scope value the fixture writes: the resolver allows them all.
const ALLOWED = {
  project_id: Array.from({ length: PROJECTS }, (_, i) => `proj${i}`),
  owner_id: Array.from({ length: 7 }, (_, i) => `u${i}`),
};
const TASKS = serverSchema.tables.find((t) => t.name === 'tasks').columns;

/** The calling thread's CPU µs where the runtime tells (bun, Node ≥ 23.9). */
function threadCpu() {
  if (typeof process.threadCpuUsage !== 'function') return undefined;
  const u = process.threadCpuUsage();
  return u.user + u.system;
}

/** Wall, process CPU and calling-thread CPU around `body`, per `units`. */
async function measured(units, body) {
  const cpu0 = process.cpuUsage();
  const thread0 = threadCpu();
  const start = now();
  await body();
  const elapsed = now() - start;
  const cpu = process.cpuUsage(cpu0);
  const thread1 = threadCpu();
  return {
    perSec: (units / elapsed) * 1e6,
    cpuUs: (cpu.user + cpu.system) / units,
    threadCpuUs: thread0 === undefined || thread1 === undefined ? undefined : (thread1 - thread0) / units,
  };
}

/**
 * A request context for `partition` of the fixture's schema. The
 * partition's epoch is the one the generator wrote (`epoch-<name>`);
 * a partition the fixture does not have is touched with it first.
 */
export async function fixtureHost(server, core, storage, partition) {
  const epoch = `epoch-${partition}`;
  await storage.touchPartition(partition, Date.now(), epoch);
  const ctx = {
    partition,
    actorId: ACTOR,
    schema: serverSchema,
    storage,
    segments: new server.MemorySegmentStore(),
    resolveScopes: () => ALLOWED,
  };
  return {
    storage,
    partition,
    core,
    request: (clientId, frames) =>
      core.encodeMessage({
        wireVersion: core.PROTOCOL_WIRE_VERSION ?? 2,
        msgKind: 'request',
        frames: [{ type: 'REQ_HEADER', clientId, schemaVersion: serverSchema.version, logEpoch: epoch }, ...frames],
      }),
    handle: (bytes) => server.handleSyncRequest(bytes, ctx),
    decode(bytes) {
      const message = core.decodeMessage(bytes);
      const error = message.frames.find((f) => f.type === 'ERROR');
      if (error) throw new Error(`host answered ${error.code}: ${error.message}`);
      return message.frames;
    },
  };
}

/** An upsert of task `t<i>` as the fixture writes it (same scopes and slug), its title `title`. */
function taskOp(partition, i, project, title, n) {
  const rowId = `t${i}`;
  const values = [rowId, project ?? `proj${i % PROJECTS}`, `u${i % 7}`, `${partition}/${rowId}`, title, n, n % 2 === 0, null];
  return { table: 'tasks', rowId, op: 'upsert', payload: new Uint8Array(encodeRow(TASKS, values)) };
}

function applied(host, bytes) {
  let n = 0;
  for (const f of host.decode(bytes)) {
    if (f.type !== 'PUSH_RESULT') continue;
    if (f.status !== 'applied') throw new Error(`push ${f.clientCommitId} not applied: ${JSON.stringify(f.results)}`);
    n += 1;
  }
  return n;
}

async function expectGrowth(host, before, commits) {
  const grew = Number(await host.storage.getMaxCommitSeq(host.partition)) - Number(before);
  if (grew !== commits) throw new Error(`the log grew by ${grew} commits, expected ${commits}`);
}

/**
 * Sequential one-commit requests of `ops` upserts (tasks t0…t<ops-1>,
 * rows the fixture has), commit ids unique per `tag`.
 */
export async function pushSequential(host, ops, commits, tag) {
  const bytes = Array.from({ length: commits }, (_, c) =>
    host.request('scale-client', [
      {
        type: 'PUSH_COMMIT',
        clientCommitId: `scale-${tag}-${ops}-${c}`,
        operations: Array.from({ length: ops }, (_, o) => taskOp(host.partition, o, undefined, `title ${tag} ${c}`, c)),
      },
    ]),
  );
  const before = await host.storage.getMaxCommitSeq(host.partition);
  const responses = new Array(commits);
  const out = await measured(commits, async () => {
    for (let c = 0; c < commits; c++) responses[c] = await host.handle(bytes[c]);
  });
  for (const r of responses) if (applied(host, r) !== 1) throw new Error('a push request had no PUSH_RESULT');
  await expectGrowth(host, before, commits);
  return out;
}

/** `clients` clients at once, each pushing `each` one-op commits (task t<client>) in sequence. */
export async function pushConcurrent(host, clients, each, tag) {
  const bytes = Array.from({ length: clients }, (_, w) =>
    Array.from({ length: each }, (_, c) =>
      host.request(`scale-c${w}`, [{ type: 'PUSH_COMMIT', clientCommitId: `scale-${tag}-${w}-${c}`, operations: [taskOp(host.partition, w, undefined, `title ${tag} ${c}`, c)] }]),
    ),
  );
  const before = await host.storage.getMaxCommitSeq(host.partition);
  const responses = [];
  const out = await measured(clients * each, () =>
    Promise.all(
      bytes.map(async (mine) => {
        for (const b of mine) responses.push(await host.handle(b));
      }),
    ),
  );
  let n = 0;
  for (const r of responses) n += applied(host, r);
  if (n !== clients * each) throw new Error(`${n} of ${clients * each} concurrent pushes applied`);
  await expectGrowth(host, before, clients * each);
  return out;
}

/**
 * Fills the partition through the handler: `commits` commits of `ops`
 * upserts of new tasks (t<first>, t<first + 1>, …), all in project proj1,
 * as the generator's `--boot-rows` does.
 */
export async function fill(host, commits, ops, first = 0) {
  const perRequest = Math.max(1, Math.min(100, Math.floor(500 / ops)));
  const before = await host.storage.getMaxCommitSeq(host.partition);
  for (let c = 0; c < commits; c += perRequest) {
    const frames = [];
    for (let k = c; k < Math.min(commits, c + perRequest); k++) {
      const operations = Array.from({ length: ops }, (_, o) => taskOp(host.partition, first + k * ops + o, 'proj1', `fill ${k}`, k));
      frames.push({ type: 'PUSH_COMMIT', clientCommitId: `scale-fill-${first}-${k}`, operations });
    }
    const n = applied(host, await host.handle(host.request('scale-filler', frames)));
    if (n !== frames.length) throw new Error(`fill: ${n} of ${frames.length} commits applied`);
  }
  await expectGrowth(host, before, commits);
}

function pullFrames(cursor, bootstrapState) {
  return [
    { type: 'PULL_HEADER', limitCommits: 100, limitSnapshotRows: 1000, maxSnapshotPages: 4, accept: ACCEPT_ROWS },
    { type: 'SUBSCRIPTION', id: 'tasks', table: 'tasks', scopes: { project_id: ['proj1'] }, cursor, ...(bootstrapState !== undefined ? { bootstrapState } : {}) },
  ];
}

/**
 * One client pulling 100-change windows of tasks in proj1 at spread
 * cursors below `top` (commits past it may be too few for a full window);
 * every pull must be served incrementally with 99 or 100 changes.
 */
export async function windowPulls(host, pulls, top) {
  if (top < 1) throw new Error(`window pulls need a log, the partition has ${top} usable commits`);
  const bytes = Array.from({ length: pulls }, (_, i) => host.request('scale-puller', pullFrames((i * 7919) % top)));
  const responses = new Array(pulls);
  const out = await measured(pulls, async () => {
    for (let i = 0; i < pulls; i++) responses[i] = await host.handle(bytes[i]);
  });
  // The fixture's commits hold one or two tasks: 99 or 100 changes.
  checkWindowPulls(host, responses, 99);
  return out;
}

/** A new client bootstrapping tasks of proj1 in 1,000-row pages; every row must arrive. */
export async function bootstrap(host, clientId, expectedRows) {
  let pages;
  const out = await measured(expectedRows, async () => {
    pages = await bootstrapPages(host, clientId, expectedRows, (state) => pullFrames(-1, state));
  });
  bootstrapRows(host, pages.segments, expectedRows);
  return out;
}
