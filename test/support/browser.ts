/**
 * Launches the machine's Chromium through playwright-core for browser tests. A test that needs a
 * browser fails with a message naming what it could not start, never skips silently.
 */
import { existsSync } from "node:fs";
import { type Browser, type BrowserContext, chromium, type Frame, type Page } from "playwright-core";
import { expect } from "vitest";

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

/**
 * Opens `attackerUrl` (a page with two iframes: the page under test, and `/framable` from the
 * attacker's own origin) and waits until the control frame has rendered its `#ok` element, so a
 * framing test cannot pass merely because frames never load. Returns the frame of the page under test.
 */
export async function openFramingPage(
  context: BrowserContext,
  attackerUrl: string,
): Promise<{ page: Page; target: Frame | undefined }> {
  const page = await context.newPage();
  await page.goto(attackerUrl);
  await expect
    .poll(
      async () =>
        (await page
          .frame({ url: (u) => u.pathname === "/framable" })
          ?.locator("#ok")
          .count()) ?? 0,
    )
    .toBe(1);
  const target = page.frames().find((f) => f !== page.mainFrame() && !f.url().endsWith("/framable"));
  return { page, target };
}
