// Shared by the host programs that compare two storages' answers (swap,
// copy, copy-reverse): a host started as one boots, the pull requests it
// must answer identically (incremental windows from several cursors, then a
// paged bootstrap followed to its end), and the first answer that differs.
import { createHost } from '../../bench/lib/server.mjs';
import { serverSchema, TABLE } from '../../bench/lib/fixture.mjs';
import { core, server } from './upstream.ts';

/** What a host runs at boot: upstream's readiness check, then requests. */
export async function startHost(storage: any, partition: string) {
  if (typeof server.ensureSyncServerReady === 'function') {
    await server.ensureSyncServerReady({ schema: serverSchema, storage });
  }
  return createHost(server, core, storage, partition);
}

function frames(cursor: number, limitCommits: number, state?: unknown) {
  return [
    { type: 'PULL_HEADER', limitCommits, limitSnapshotRows: 7, maxSnapshotPages: 2, accept: 0b0011 },
    {
      type: 'SUBSCRIPTION',
      id: 'tasks',
      table: TABLE,
      scopes: { project_id: ['p1'] },
      cursor,
      ...(state !== undefined ? { bootstrapState: state } : {}),
    },
  ];
}

/**
 * Every answer to window pulls from cursors spread over `partition`'s log
 * (limits 1, 10 and 100 commits), then a bootstrap followed page by page to
 * its end. `clientPrefix` names the two request clients. Throws on an
 * ERROR frame.
 */
export async function pullAnswers(host: any, partition: string, clientPrefix: string) {
  const max = Number(await host.storage.getMaxCommitSeq(partition));
  const bytes: Uint8Array[] = [];
  for (const cursor of [0, 1, Math.floor(max / 2), max - 1, max]) {
    for (const limit of [1, 10, 100]) {
      bytes.push(await host.handle(host.request(`${clientPrefix}-puller`, frames(cursor, limit))));
    }
  }
  let state: unknown;
  for (let page = 0; page < 100; page++) {
    const answer = await host.handle(host.request(`${clientPrefix}-bootstrapper`, frames(-1, 100, state)));
    bytes.push(answer);
    const message = core.decodeMessage(answer);
    const sub = message.frames.find((f: any) => f.type === 'SUB_END' || f.type === 'SUB_START');
    state = message.frames.find((f: any) => f.bootstrapState !== undefined && f.bootstrapState !== null)?.bootstrapState;
    if (state === undefined || sub === undefined) break;
  }
  for (const b of bytes) host.decode(b);
  return { bytes, max };
}

/** The index of the first answer that differs (or is missing on one side), or undefined. */
export function firstDifference(a: Uint8Array[], b: Uint8Array[]): number | undefined {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (!x || !y || x.length !== y.length || !x.every((v, j) => v === y[j])) return i;
  }
  return undefined;
}
