// The commits the crash and multi-process programs push, derived from the
// commit number alone so that the parent can say what a commit must have
// written without asking the child.
import { taskRow } from '../../__test__/support/harness.mjs';

export const CRASH_PARTITION = 'crash';
export const CRASH_CLIENT = 'crash-client';

export const ccidOf = (k) => `k-${k}`;
export const kOf = (ccid) => Number(ccid.slice(2));

/** Rows of commit k, other than the shared hot row. */
export const rowIdsOf = (k) => Array.from({ length: 1 + (k % 3) }, (_, o) => `r${k}-${o}`);

/** Commit k (k >= 5, k % 5 == 0) deletes commit (k-5)'s first row. */
export const deletesOf = (k) => (k >= 5 && k % 5 === 0 ? `r${k - 5}-0` : undefined);

const scopesOf = (k) => ({ project_id: `p${k % 4}`, owner_id: 'u1' });

/** Host ops for commit k: the hot row at version k, k's rows, and maybe a delete. */
export function opsOf(k) {
  const v = { project: `p${k % 4}`, owner: 'u1' };
  const ops = [{ table: 'tasks', row: taskRow('hot', { ...v, count: k }, { version: k }) }];
  for (const id of rowIdsOf(k)) ops.push({ table: 'tasks', row: taskRow(id, { ...v, title: `t${k}` }) });
  const del = deletesOf(k);
  if (del !== undefined) ops.push({ table: 'tasks', delete: del, scopes: scopesOf(k) });
  return ops;
}

/** Number of changes commit k records. */
export const changeCountOf = (k) => opsOf(k).length;
