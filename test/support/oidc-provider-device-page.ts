/**
 * A person on another device, in Chromium, on oidc-provider's device flow pages (its `deviceFlow`
 * defaults, test/support/oidc-provider.ts): opens the verification address with the code filled
 * in, checks the code, confirms, signs in as alice and consents; or presses "Abort" on the
 * confirmation page. Requests to anything but loopback (the pages' web fonts) are refused: the
 * test machine has no other network.
 */
import type { Browser } from "playwright-core";
import { expect } from "vitest";

export async function decideOnDevicePage(
  browser: Browser,
  verificationUri: string,
  decision: "approve" | "deny",
  options: { userCode?: string; screenshot?: string } = {},
): Promise<void> {
  const context = await browser.newContext();
  try {
    await context.route(/^https?:\/\/(?!127\.0\.0\.1[:/])/, (route) => route.abort());
    const page = await context.newPage();
    await page.goto(verificationUri);
    // The confirmation page shows the code the device printed.
    if (options.userCode)
      await expect(page.locator("body").textContent()).resolves.toContain(options.userCode);
    if (options.screenshot) await page.screenshot({ path: options.screenshot });
    if (decision === "deny") {
      await page.getByRole("button", { name: "[ Abort ]" }).click();
      await page.waitForLoadState();
      return;
    }
    await page.getByRole("button", { name: "Continue" }).click();
    await page.locator('input[name="login"]').fill("alice");
    await page.locator('input[name="password"]').fill("irrelevant");
    await page.getByRole("button", { name: "Sign-in" }).click();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForLoadState();
    await expect(page.locator("body").textContent()).resolves.toMatch(/Sign-in Success/i);
  } finally {
    await context.close();
  }
}
