// A hostile page in headless Chromium, against a service on another loopback origin.
// Driven by tests/api/test_cross_site.py; prints one JSON line.
//
//   node cross_site.mjs attack PAGE_URL SERVICE_URL
//     loads the attacker's page (which attacks SERVICE_URL by itself) and reports what
//     the page could read, and the statuses the service answered (seen by the browser,
//     not by the page).
//   node cross_site.mjs open CONTROL_URL URL...
//     navigates to each URL (stream bodies of active types), then to CONTROL_URL, whose
//     script reports to the collector: once its report is in, any script of the earlier
//     pages would have reported too.
import { chromium } from "playwright-core";

const [mode, ...args] = process.argv.slice(2);
const T = { timeout: 30000 };
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const context = await browser.newContext({ acceptDownloads: false });
const page = await context.newPage();
// On stderr, for a failure's message: the page's own errors and what it logged.
page.on("pageerror", (error) => process.stderr.write(`pageerror: ${error.message}\n`));
page.on("console", (msg) => process.stderr.write(`console: ${msg.text()}\n`));
try {
  if (mode === "attack") {
    const [pageUrl, service] = args;
    const answered = [];
    page.on("response", (r) => {
      if (r.url().startsWith(service)) {
        answered.push({ method: r.request().method(), url: r.url(), status: r.status() });
      }
    });
    await page.goto(pageUrl, T);
    await page.waitForFunction(() => window.done === true, null, T);
    const results = await page.evaluate(() => window.results);
    process.stdout.write(JSON.stringify({ results, answered }) + "\n");
  } else if (mode === "open") {
    const [control, ...urls] = args;
    const opened = [];
    for (const url of urls) {
      try {
        const response = await page.goto(url, T);
        opened.push({ url, status: response ? response.status() : null, title: await page.title() });
      } catch (error) {
        // A download (Content-Disposition: attachment) aborts the navigation.
        opened.push({ url, error: String(error.message).split("\n")[0] });
      }
    }
    await page.goto(control, T);
    await page.waitForFunction(() => window.reported === true, null, T);
    process.stdout.write(JSON.stringify({ opened }) + "\n");
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
} finally {
  await browser.close();
}
