// The service's HTML pages in headless Chromium under their Content-Security-Policy, and a
// page on another origin that frames them.
//
//   node browser_pages.mjs BASE_URL ATTACKER_URL
//
// Prints {"pages": {path: {"rendered": bool, "violations": [...], "errors": [...]}},
//         "framed": {path: {"url": frame URL, "reached": whether the framed page's own
//                   content was there}}}.
import { chromium } from "playwright-core";

const [base, attacker] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

// What proves each page rendered: an element its own script draws (or its markup has).
const PAGES = {
  "/": "#question",
  "/docs": ".swagger-ui .info .title",
  "/redoc": "[role=search] input, .api-info h1",
  "/inspect": "body main, body header",
};

try {
  const context = await browser.newContext();
  // Every CSP violation on any page, reported by the browser itself.
  await context.addInitScript(() => {
    window.__violations = [];
    document.addEventListener("securitypolicyviolation", (e) =>
      window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const pages = {};
  for (const [path, selector] of Object.entries(PAGES)) {
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (error) => errors.push(error.message));
    page.on("console", (msg) => {
      if (msg.type() === "error" && !/status of 401/.test(msg.text())) errors.push(msg.text());
    });
    await page.goto(base + path);
    let rendered = true;
    try {
      await page.waitForSelector(selector, { timeout: 30000 });
    } catch {
      rendered = false;
    }
    // ReDoc's and Swagger UI's late work (styles, the search worker) has run by now.
    await page.waitForLoadState("networkidle");
    const violations = await page.evaluate(() => window.__violations);
    pages[path] = { rendered, violations, errors };
    await page.close();
  }

  // The attacker's page frames each page; a blocked frame shows Chromium's error page.
  const framed = {};
  for (const path of ["/", "/docs", "/inspect"]) {
    const page = await context.newPage();
    await page.goto(`${attacker}?frame=${encodeURIComponent(base + path)}`);
    await page.waitForFunction(() => window.__frameLoaded === true, null, { timeout: 30000 });
    const frame = page.frames().find((f) => f !== page.mainFrame());
    const reached = frame
      ? await frame.evaluate(() => document.title.includes("agent-replay")
          || document.querySelector("#question, #swagger-ui, main") !== null).catch(() => false)
      : false;
    framed[path] = { url: frame ? frame.url() : null, reached };
    await page.close();
  }
  process.stdout.write(JSON.stringify({ pages, framed }) + "\n");
} finally {
  await browser.close();
}
