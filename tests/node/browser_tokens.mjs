// The demo page in headless Chromium against a service that requires keys: it asks for a key
// once, keeps only a chat token for its thread, streams with it past its expiry, and each
// time the connection is cut (by a relay the test controls) with the token expired, gets a
// fresh token and resumes once.
//
//   node browser_tokens.mjs BASE_URL THREAD ADMIN_KEY
//
// Prints "EXPIRED" once the page's token is refused as expired by the service while the
// answer still streams to the page, then waits for a line on stdin (the test cuts the
// connection before sending it); twice. Prints one JSON object at the end: what the page
// asked, kept and requested before and after each cut, the answer as streamed, and the
// thread as the service has it.
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [base, thread, adminKey] = process.argv.slice(2);
const tokenKey = `agent-replay-demo-token:${thread}`;
const input = createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

// The page's requests to the service: {phase, kind, method, token, status, code}.
let phase = "before";
const requests = [];
function kindOf(url, method) {
  const path = new URL(url).pathname;
  if (path === "/v1/tokens") return "mint";
  if (path === "/v1/chat/demo" && method === "POST") return "stream";
  if (/^\/v1\/runs\/[^/]+\/stream$/.test(path)) return "stream";
  if (path.startsWith("/v1/")) return "api";
  return null;
}

try {
  const page = await (await browser.newContext()).newPage();
  page.on("response", async (response) => {
    const request = response.request();
    const kind = kindOf(request.url(), request.method());
    if (!kind) return;
    const entry = { phase, kind, method: request.method(), path: new URL(request.url()).pathname,
                    status: response.status(), token: null, code: null };  // fmt: skip
    requests.push(entry);
    const auth = (await request.allHeaders()).authorization;
    entry.token = auth ? auth.replace(/^Bearer /, "") : new URL(request.url()).searchParams.get("token");
    if (kind === "mint") entry.token = null;  // the key, not a token
    if (response.status() === 401 && request.resourceType() !== "eventsource") {
      try { entry.code = (await response.json()).error.code; } catch { /* body gone */ }
    }
  });
  await page.goto(`${base}/?thread=${encodeURIComponent(thread)}`);
  await page.evaluate(() => {
    window.seen = { renders: [], asked: 0 };
    new MutationObserver(() => window.seen.renders.push(document.querySelector("#turns").textContent))
      .observe(document.querySelector("#turns"), { childList: true });
  });
  // The page found out the service needs a key: it asks, once.
  await page.waitForSelector("#key-form:not([hidden])", { timeout: 30000 });
  const asked = await page.$$eval("#key-form:not([hidden])", (nodes) => nodes.length);
  await page.fill("#key", adminKey);
  await page.click("#use-key");
  await page.waitForFunction(() => !document.querySelector("#send").disabled, null, { timeout: 30000 });
  await page.fill("#question", "Is it cold in Oslo?");
  await page.click("#send");
  await page.waitForFunction(() => document.body.innerText.includes("You said"), null, { timeout: 30000 });

  // Twice: wait until the service itself refuses the page's current token as expired while
  // its open stream still brings events, then let the test cut the connection. The first
  // cut drops the fetch that started the run, the second the EventSource that resumed it.
  const tokens = [];
  for (const next of ["after", "after2"]) {
    // (After a cut, the token the page renewed for its resume.)
    const previous = tokens[tokens.length - 1] ?? null;
    await page.waitForFunction(([key, prev]) => sessionStorage.getItem(key) && sessionStorage.getItem(key) !== prev,
                               [tokenKey, previous], { timeout: 30000 });  // fmt: skip
    const token = await page.evaluate((key) => sessionStorage.getItem(key), tokenKey);
    tokens.push(token);
    const deadline = Date.now() + 30000;
    for (;;) {
      const r = await fetch(`${base}/v1/chat/demo?threadId=${encodeURIComponent(thread)}`,
                            { headers: { Authorization: `Bearer ${token}` } });  // fmt: skip
      const body = await r.json();
      if (r.status === 401 && body.error.code === "token_expired") break;
      if (Date.now() > deadline) throw new Error(`the token never expired: ${r.status}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const rendered = await page.evaluate(() => window.seen.renders.length);
    await page.waitForFunction((n) => window.seen.renders.length > n, rendered, { timeout: 30000 });
    if (await page.evaluate(() => document.body.innerText.includes("Dress warmly"))) {
      throw new Error("the answer ended before the cut");
    }
    process.stdout.write("EXPIRED\n");
    await lines.next();  // the test has cut the connection
    phase = next;
  }
  await page.waitForFunction(() => document.body.innerText.includes("Dress warmly")
    && !document.querySelector("#send").disabled, null, { timeout: 60000 });
  const seen = await page.evaluate(() => window.seen);
  const storage = await page.evaluate(() => ({
    session: Object.fromEntries(Object.entries(sessionStorage)),
    local: Object.fromEntries(Object.entries(localStorage)),
  }));
  const keyFormShown = await page.$$eval("#key-form:not([hidden])", (nodes) => nodes.length);
  const final = await page.$$eval(".turn", (nodes) => nodes.map((n) => n.textContent));
  process.stdout.write(JSON.stringify({
    asked, keyFormShown, tokens, storage, requests,
    live: seen.renders[seen.renders.length - 2], final,
  }) + "\n");
} finally {
  await browser.close();
  input.close();  // stdin would keep the process alive
}
