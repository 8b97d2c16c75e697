/**
 * Settles with what `work` settled with, or with "still running" once `guardMs` passed: a client
 * loop that spins or sleeps forever would otherwise hang the test file instead of failing it. Not
 * a timing assertion: the guard only turns a hang into a failure message.
 */
export async function settleWithin<T>(
  work: Promise<T>,
  guardMs = 15_000,
): Promise<{ value?: T; error?: unknown; hung?: true }> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<{ hung: true }>((resolve) => {
    timer = setTimeout(() => resolve({ hung: true }), guardMs);
  });
  try {
    return await Promise.race([
      work.then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      ),
      guard,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
