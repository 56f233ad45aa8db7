// Raw reads for the reliability programs. `query` reads a SQLite file
// through the sqlite3 shell, with room for large results (the shared
// __test__/support/sqlite-cli.mjs keeps execFileSync's 1 MB default).
// `sqliteTarget` / `pgTarget` describe one database the programs push to
// and then inspect: how to open a storage on it (also from a child process:
// `options` is plain JSON), and raw SQL reads (`query`, async, rows as
// objects) in the engine's dialect. PostgreSQL reads go through one
// long-lived psql session confined to the target's schema.
import { execFileSync, spawn } from 'node:child_process';
import { NativeStorage } from '../../__test__/support/package.mjs';

export function query(path, sql) {
  const out = execFileSync('sqlite3', ['-json', path, sql], { encoding: 'utf8', maxBuffer: 1 << 30 });
  return out.trim() === '' ? [] : JSON.parse(out);
}

/** A SQLite file. */
export function sqliteTarget(path, { synchronous } = {}) {
  const options = { url: `sqlite:${path}` };
  if (synchronous) options.synchronous = synchronous;
  return {
    engine: 'sqlite',
    path,
    options,
    open: (extra = {}) => new NativeStorage({ ...options, ...extra }),
    query: async (sql) => query(path, sql),
    /** SQL text reading the integer `key` of the JSON column `col`. */
    jsonInt: (col, key) => `json_extract(${col}, '$.${key}')`,
    close: async () => {},
  };
}

let schemaCounter = 0;
/** A schema name no other run uses. */
export function freshSchemaName(prefix = 'syncular_stress') {
  schemaCounter += 1;
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${schemaCounter}`;
}

const quoteIdent = (name) => `"${name.replaceAll('"', '""')}"`;

/**
 * One psql process reading statements from a pipe. Each statement's rows
 * come back as one JSON array (json_agg); a marker printed to stdout and to
 * stderr after each statement ends its output, so errors are attributed to
 * the statement that caused them.
 */
export class Psql {
  #child;
  #out = '';
  #err = '';
  #queue = Promise.resolve();
  #waiter;
  #n = 0;
  /** What an unexpected exit reports: the session's last stderr and the last statement sent. */
  #errTail = '';
  #last = '';
  #closing = false;

  constructor(url, { schema } = {}) {
    this.#child = spawn('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0', url], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.#child.stdout.setEncoding('utf8');
    this.#child.stderr.setEncoding('utf8');
    this.#child.stdout.on('data', (d) => {
      this.#out += d;
      this.#waiter?.();
    });
    this.#child.stderr.on('data', (d) => {
      this.#err += d;
      this.#errTail = (this.#errTail + d).slice(-800);
      this.#waiter?.();
    });
    this.#child.on('error', (err) => {
      this.dead = err;
      this.#waiter?.();
    });
    this.#child.on('exit', (code, signal) => {
      const how = this.#closing ? 'after close()' : 'unasked';
      this.dead ??= new Error(`psql exited (${signal ?? code}, ${how}); its last stderr: ${this.#errTail.slice(-400) || '(none)'}; the last statement sent: ${this.#last.slice(0, 300)}`);
      this.#waiter?.();
    });
    this.exec('SET client_min_messages TO warning');
    if (schema !== undefined) this.exec(`SET search_path TO ${quoteIdent(schema)}`);
  }

  /** Runs `sql` (no result rows expected); rejects on a server error. */
  exec(sql) {
    return this.#run(`${sql};`).then(() => undefined);
  }

  /**
   * DROP SCHEMA `name` CASCADE, tried again (up to 5 times) when the
   * server ends it as a deadlock. Seen in `npm run test:stress`: a storage
   * closed just before leaves backends whose exit drops their pg_temp
   * views of the schema's tables (registered queries), and that cleanup
   * and the cascade lock the same relations in opposite orders; PostgreSQL
   * breaks the cycle by failing one of them, here the DROP.
   */
  async dropSchema(name, { ifExists = true } = {}) {
    const sql = `DROP SCHEMA ${ifExists ? 'IF EXISTS ' : ''}${quoteIdent(name)} CASCADE`;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.exec(sql);
      } catch (err) {
        if (attempt >= 5 || !/deadlock detected/.test(err.message)) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  }

  /** Rows of the SELECT `sql` as plain objects (numbers for integers). */
  async query(sql) {
    const text = await this.#run(`SELECT coalesce(json_agg(q), '[]'::json) FROM (${sql}) q;`);
    return JSON.parse(text);
  }

  #run(statement) {
    const run = this.#queue.then(() => this.#send(statement));
    this.#queue = run.catch(() => {});
    return run;
  }

  #send(statement) {
    const marker = `__syncular_psql_done_${++this.#n}__`;
    return new Promise((resolve, reject) => {
      const check = () => {
        const o = this.#out.indexOf(`${marker}\n`);
        const e = this.#err.indexOf(`${marker}\n`);
        if (o >= 0 && e >= 0) {
          const out = this.#out.slice(0, o);
          const err = this.#err.slice(0, e);
          this.#out = this.#out.slice(o + marker.length + 1);
          this.#err = this.#err.slice(e + marker.length + 1);
          this.#waiter = undefined;
          if (err.trim() !== '') reject(new Error(`psql: ${err.trim().slice(0, 600)}`));
          else resolve(out.trim());
        } else if (this.dead) {
          this.#waiter = undefined;
          reject(this.dead);
        }
      };
      this.#waiter = check;
      this.#last = statement;
      this.#child.stdin.write(`${statement}\n\\echo ${marker}\n\\warn ${marker}\n`);
      check();
    });
  }

  close() {
    if (this.dead) return Promise.resolve();
    this.#closing = true;
    return new Promise((resolve) => {
      this.#child.once('exit', () => resolve());
      this.#child.stdin.end('\\q\n');
    });
  }
}

/**
 * A fresh schema on the PostgreSQL server at `url` (created by the first
 * storage opened on it). `close()` drops the schema and ends psql.
 */
export function pgTarget(url, { schema = freshSchemaName(), maxConnections = 4 } = {}) {
  const options = { url, schema, maxConnections };
  const psql = new Psql(url, { schema });
  let tables;
  let closed;
  return {
    engine: 'postgres',
    schema,
    options,
    psql,
    open: (extra = {}) => new NativeStorage({ ...options, ...extra }),
    query: (sql) => psql.query(sql),
    jsonInt: (col, key) => `(${col}->>'${key}')::bigint`,
    /**
     * Row count and content hash of every table in the schema, as one
     * string. The table list (a catalog scan, slow on a server with many
     * schemas) is read on the first call and when `listTables` is set.
     */
    snapshot: async ({ listTables = false } = {}) => {
      if (tables === undefined || listTables) {
        const rows = await psql.query(
          `SELECT c.relname AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '${schema}' AND c.relkind IN ('r', 'p') ORDER BY 1`,
        );
        tables = rows.map((r) => r.t);
      }
      if (tables.length === 0) return '';
      const parts = tables.map(
        (t) => `SELECT '${t}' AS t, count(*) || ':' || md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) AS h FROM ${quoteIdent(schema)}.${quoteIdent(t)} x`,
      );
      const rows = await psql.query(parts.join(' UNION ALL '));
      return rows.map((r) => `${r.t}=${r.h}`).join(' ');
    },
    // Once: a second call (a caller's `finally` after a failed first one)
    // answers the first's outcome, rather than an error of the psql
    // session the first one ended that would hide the real cause.
    close: () =>
      (closed ??= (async () => {
        try {
          await psql.dropSchema(schema);
        } finally {
          await psql.close();
        }
      })()),
  };
}
