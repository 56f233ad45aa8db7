// The event loop's longest gap while one call runs, for the tests that
// check that long work (a layout repair, an index build) runs off the JS
// thread: a 5 ms timer keeps turning, and the longest time between two of
// its turns is how long the loop was held.

/** Gaps at least this long (ms) are listed in `gaps`. */
const LISTED_MS = 20;

/**
 * Awaits `fn()` under that timer: { value, took, worst, gaps }, `took` how
 * long the call took and `worst` the longest gap (both in ms); `gaps` the
 * gaps of 20 ms or more as `{ from, ms }`, `from` on the wall clock
 * (performance.timeOrigin + performance.now(), ms), to be set beside what
 * another process saw at the same time (machine-gaps.mjs). A stall ends
 * with the timer's next turn, after the await resumes: the timer runs
 * 20 ms more before it stops. It stops when `fn` fails too.
 */
export async function withLoopGap(fn) {
  let worst = 0;
  const gaps = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const gap = now - last;
    worst = Math.max(worst, gap);
    if (gap >= LISTED_MS) gaps.push({ from: performance.timeOrigin + last, ms: gap });
    last = now;
  }, 5);
  try {
    const started = performance.now();
    const value = await fn();
    const took = performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 20));
    return { value, took, worst, gaps };
  } finally {
    clearInterval(timer);
  }
}
