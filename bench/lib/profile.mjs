// The per-call profile of `run.mjs --profile` (host workloads): a storage
// wrapped so that every member the real handler calls is timed from the
// call until its promise settles ("in call"), and the time from the
// previous call on the same object settling until this one starts ("before
// call": the handler's own work, promise turns, and whatever else the
// event loop ran). Transactions from `begin` are wrapped the same way,
// their members named `tx.<member>`. Works for any storage: each call goes
// to the wrapped object's own member, with that object as `this`.

const now = () => Number(process.hrtime.bigint()) / 1e3; // µs

/** Per-member sums: { calls, inUs, beforeUs }. */
export class CallProfile {
  members = new Map();

  /** Forgets what was measured so far (set-up calls before the workload). */
  reset() {
    this.members.clear();
  }

  add(member, inUs, beforeUs) {
    let m = this.members.get(member);
    if (m === undefined) {
      m = { calls: 0, inUs: 0, beforeUs: 0, beforeCalls: 0 };
      this.members.set(member, m);
    }
    m.calls += 1;
    m.inUs += inUs;
    if (beforeUs !== undefined) {
      m.beforeUs += beforeUs;
      m.beforeCalls += 1;
    }
  }

  /** `{ member: { calls, usPerCall, usBefore } }`, per unit of work (`per`: pushes, pulls, …). */
  summary(per) {
    const out = {};
    for (const [member, m] of [...this.members].sort((a, b) => b[1].inUs - a[1].inUs)) {
      out[member] = {
        callsPerUnit: m.calls / per,
        usPerCall: m.inUs / m.calls,
        usBefore: m.beforeCalls > 0 ? m.beforeUs / m.beforeCalls : undefined,
      };
    }
    return out;
  }
}

/** `target` with every function member timed into `profile` (names prefixed with `prefix`). */
export function profiled(target, profile, prefix = '') {
  let lastEnd;
  return new Proxy(target, {
    get(obj, prop) {
      const v = obj[prop];
      if (typeof v !== 'function' || typeof prop !== 'string') return v;
      const name = `${prefix}${prop}`;
      return (...args) => {
        const start = now();
        const before = lastEnd === undefined ? undefined : start - lastEnd;
        const done = (result) => {
          const end = now();
          lastEnd = end;
          profile.add(name, end - start, before);
          if (prop === 'begin' && result !== null && typeof result === 'object') return profiled(result, profile, 'tx.');
          return result;
        };
        let out;
        try {
          out = v.apply(obj, args);
        } catch (err) {
          done(undefined);
          throw err;
        }
        if (out instanceof Promise || (out !== null && typeof out?.then === 'function')) {
          return Promise.resolve(out).then(done, (err) => {
            done(undefined);
            throw err;
          });
        }
        return done(out);
      };
    },
  });
}

/** Markdown rows comparing each storage's profile of one workload. */
export function profileTable(title, labels, summaries) {
  // Members called at most once in twenty units are set-up or teardown.
  const members = [...new Set(summaries.flatMap((s) => Object.keys(s).filter((m) => s[m].callsPerUnit >= 0.05)))];
  const fmt = (x) => (x === undefined ? '—' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
  const lines = [`\n${title}: µs per call until it settles / µs before it since the previous call settled (calls per unit)`];
  lines.push(`| member | ${labels.join(' | ')} |`);
  lines.push(`|---|${labels.map(() => '---').join('|')}|`);
  for (const m of members) {
    const cells = summaries.map((s) => {
      const x = s[m];
      return x === undefined ? '—' : `${fmt(x.usPerCall)} / ${fmt(x.usBefore)} (${x.callsPerUnit.toFixed(2)})`;
    });
    lines.push(`| ${m} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}
