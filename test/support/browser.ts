/**
 * Launches the machine's Chromium through playwright-core for browser tests. A test that needs a
 * browser fails with a message naming what it could not start, never skips silently.
 */
import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

export const CHROMIUM_PATH = process.env.GATEHOUSE_CHROMIUM ?? "/usr/bin/chromium";

/** Flags for a headless Chromium in a container with two shared cores. */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `browser tests need Chromium at ${CHROMIUM_PATH} (install it with "apt-get install -y chromium" ` +
        "or set GATEHOUSE_CHROMIUM)",
    );
  }
  try {
    return await chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true });
  } catch (cause) {
    throw new Error(`could not launch Chromium at ${CHROMIUM_PATH}: ${(cause as Error).message}`, { cause });
  }
}
