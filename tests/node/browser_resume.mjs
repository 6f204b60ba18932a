// The demo page in headless Chromium, its connection cut mid-answer by a relay the test
// controls: the page says so, resumes from the last event it saw, and ends with the whole
// answer once.
//
//   node browser_resume.mjs BASE_URL THREAD
//
// Prints "MID" once the answer is under way, then waits for a line on stdin (the test cuts
// the connection before sending it). Prints {"banners", "live", "final"} at the end:
// every banner text shown, the answer's text as streamed (the last render before the page
// re-reads the thread), and the thread as the service has it.
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [base, thread] = process.argv.slice(2);
const input = createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await (await browser.newContext()).newPage();
  await page.goto(`${base}/?thread=${encodeURIComponent(thread)}`);
  // Every render of the turns and every banner, as the page shows them.
  await page.evaluate(() => {
    window.seen = { renders: [], banners: [] };
    new MutationObserver(() => window.seen.renders.push(document.querySelector("#turns").textContent))
      .observe(document.querySelector("#turns"), { childList: true });
    new MutationObserver(() => {
      const b = document.querySelector("#banner");
      if (!b.hidden && b.textContent) window.seen.banners.push(b.textContent);
    }).observe(document.querySelector("#banner"), { childList: true, attributes: true, characterData: true, subtree: true });
  });
  await page.fill("#question", "Is it cold in Oslo?");
  await page.click("#send");
  await page.waitForFunction(() => document.body.innerText.includes("You said"), null, { timeout: 30000 });
  process.stdout.write("MID\n");
  await lines.next();  // the test has cut the connection
  await page.waitForFunction(() => window.seen.banners.length > 0, null, { timeout: 30000 });
  await page.waitForFunction(() => document.body.innerText.includes("Dress warmly")
    && !document.querySelector("#send").disabled, null, { timeout: 60000 });
  const seen = await page.evaluate(() => window.seen);
  const final = await page.$$eval(".turn", (nodes) => nodes.map((n) => n.textContent));
  process.stdout.write(JSON.stringify({
    banners: seen.banners, live: seen.renders[seen.renders.length - 2], final,
  }) + "\n");
} finally {
  await browser.close();
  input.close();  // stdin would keep the process alive
}
