// A call measured as the bounds tests and the attack generator measure it.

/** Settles `fn()` while sampling the event loop (a 5 ms ticker) and RSS: { ok, value | error, ms, stall, rss }. */
export async function measured(fn) {
  let last = performance.now();
  let stall = 0;
  const rss0 = process.memoryUsage.rss();
  let rss = rss0;
  const ticker = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last);
    last = now;
    rss = Math.max(rss, process.memoryUsage.rss());
  }, 5);
  const t0 = performance.now();
  let out;
  try {
    out = { ok: true, value: await fn() };
  } catch (error) {
    out = { ok: false, error };
  }
  const end = performance.now();
  clearInterval(ticker);
  rss = Math.max(rss, process.memoryUsage.rss());
  return { ...out, ms: end - t0, stall: Math.max(stall, end - last), rss: rss - rss0 };
}
