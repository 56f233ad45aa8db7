'use strict';
// Registered queries and index lookups: the request as the native layer
// takes it, and the serve-gate hook into the host's own functions.

const { invalidArgument } = require('./errors');

function relationIn(r) {
  if (!r || typeof r !== 'object' || typeof r.table !== 'string') return undefined;
  if (r.alias !== undefined && typeof r.alias !== 'string') return undefined;
  // Non-numbers become NaN so the native check reports the boundaries.
  const out = {
    table: r.table,
    start: typeof r.start === 'number' ? r.start : NaN,
    end: typeof r.end === 'number' ? r.end : NaN,
  };
  if (r.alias !== undefined) out.alias = r.alias;
  return out;
}

/**
 * AuthoritativeQueryRequest → { request, params }. `typeof plan === 'object'`
 * selects the 0.24 relation plan, else a string `sql` the 0.15.x form
 * (contract.md §8.2); anything else is a malformed plan.
 */
function requestIn(query) {
  if (!query || typeof query !== 'object') {
    throw invalidArgument('queryAuthoritative: query must be an AuthoritativeQueryRequest');
  }
  const tables = Array.isArray(query.tables) ? query.tables.map((t) => String(t)) : [];
  const params = Array.isArray(query.params) ? query.params : [];
  const request = { tables };
  if (typeof query.plan === 'object') {
    const plan = query.plan;
    const relations =
      plan !== null && typeof plan.sql === 'string' && Array.isArray(plan.relations)
        ? plan.relations.map(relationIn)
        : undefined;
    if (relations === undefined || relations.includes(undefined)) request.planMalformed = true;
    else {
      request.planSql = plan.sql;
      request.relations = relations;
    }
  } else if (typeof query.sql === 'string') {
    request.sql = query.sql;
  } else {
    request.planMalformed = true;
  }
  return { request, params };
}

/** The host's serve-gate functions, when it exports both (contract.md Q11). */
function gateHooks(host) {
  if (
    host &&
    typeof host.serveGateRefusal === 'function' &&
    typeof host.serveNotReadyError === 'function'
  ) {
    return { refusal: host.serveGateRefusal, notReady: host.serveNotReadyError };
  }
  return undefined;
}

/**
 * A registered query's native result as the host sees it: `{ rows,
 * maxCommitSeq }`. The native layer makes at most a few milliseconds of rows
 * in one event-loop turn; when some are left (`more`), the rest are made
 * over the next turns, so a large result never holds the event loop.
 */
async function queryResult(out) {
  const { more } = out;
  if (more !== undefined) {
    do await new Promise(setImmediate);
    while (!more.fill(out.rows));
  }
  return { rows: out.rows, maxCommitSeq: out.maxCommitSeq };
}

function indexArgs(method, query) {
  if (!query || typeof query !== 'object') throw invalidArgument(`${method}: query must be an IndexRowScanQuery`);
  return {
    table: query.table,
    index: typeof query.index === 'string' ? query.index : '',
    values: Array.isArray(query.values) ? query.values : undefined,
    afterRowId: query.afterRowId ?? '',
    limit: typeof query.limit === 'number' ? query.limit : NaN,
  };
}

module.exports = { requestIn, gateHooks, indexArgs, queryResult };
