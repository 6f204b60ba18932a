// The demo page in headless Chromium, as a person uses it: ask, close the tab mid-answer,
// open the page again, and see the whole answer once.
//
//   node browser_demo.mjs BASE_URL THREAD SCREENSHOT.png
//
// Prints {"first": [...turn texts after the first tab closed...], "final": [...turn texts...]}.
import { chromium } from "playwright-core";

const [base, thread, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const turns = (page) => page.$$eval(".turn", (nodes) => nodes.map((n) => n.innerText));
try {
  const context = await browser.newContext();
  const url = `${base}/?thread=${encodeURIComponent(thread)}`;

  let page = await context.newPage();
  await page.goto(url);
  await page.fill("#question", "Is it cold in Oslo?");
  await page.click("#send");
  // Mid-answer: the first words are on screen, the answer is not finished.
  await page.waitForFunction(() => document.querySelectorAll(".turn.assistant").length >= 1
    && document.body.innerText.includes("You said"), null, { timeout: 20000 });
  const first = await turns(page);
  await page.close();  // the tab closes

  page = await context.newPage();
  await page.goto(url);
  await page.waitForFunction(() => document.body.innerText.includes("Dress warmly")
    && !document.querySelector("#send").disabled, null, { timeout: 30000 });
  const final = await turns(page);
  await page.screenshot({ path: screenshot, fullPage: true });
  process.stdout.write(JSON.stringify({ first, final }) + "\n");
} finally {
  await browser.close();
}
