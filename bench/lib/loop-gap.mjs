// The event loop's longest gap while one call runs, for the tests that
// check that long work (a layout repair, an index build) runs off the JS
// thread: a 5 ms timer keeps turning, and the longest time between two of
// its turns is how long the loop was held.

/**
 * Awaits `fn()` under that timer: { value, took, worst }, `took` how long
 * the call took and `worst` the longest gap (both in ms). A stall ends with
 * the timer's next turn, after the await resumes: the timer runs 20 ms
 * more before it stops. It stops when `fn` fails too.
 */
export async function withLoopGap(fn) {
  let worst = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 5);
  try {
    const started = performance.now();
    const value = await fn();
    const took = performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 20));
    return { value, took, worst };
  } finally {
    clearInterval(timer);
  }
}
