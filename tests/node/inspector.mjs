// The run inspector in headless Chromium, as a person uses it. Driven step by step by
// tests/api/test_inspector.py over stdin/stdout: each step prints one JSON line with what
// the page shows, then (where the test appends events meanwhile) waits for "go" on stdin.
//
//   node inspector.mjs BASE_URL SCENARIO [ARGS...]
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";

const [base, scenario, ...args] = process.argv.slice(2);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (step, data = {}) => process.stdout.write(JSON.stringify({ step, ...data }) + "\n");
const go = async () => { const { value } = await lines.next(); if (value !== "go") throw new Error(`expected go, got ${value}`); };
const T = { timeout: 30000 };

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
const problems = [];
page.on("pageerror", (error) => problems.push(`pageerror: ${error.message}`));
page.on("dialog", async (dialog) => { problems.push(`dialog: ${dialog.message()}`); await dialog.dismiss(); });
page.on("console", (msg) => {
  // Asking for a key starts with the refused request, which the browser logs.
  const refused = scenario === "key" && /status of 401/.test(msg.text());
  // The test cuts the live stream's connection on purpose.
  const cut = scenario === "live" && /ERR_INCOMPLETE_CHUNKED_ENCODING/.test(msg.text());
  if (msg.type() === "error" && !refused && !cut) problems.push(`console: ${msg.text()}`);
});

const rows = () => page.$$eval("tbody tr", (trs) => trs.map((tr) => tr.dataset.runId));
const conversation = () => page.$eval(".conversation", (n) => n.innerText);
const argText = (call, path) => page.evaluate(([c, p]) => {
  const pre = document.querySelector(`[data-tool-call-id="${c}"] [data-path="${p}"] pre`);
  return pre ? pre.textContent : null;
}, [call, path]);

try {
  if (scenario === "list") {
    await page.goto(`${base}/inspect`);
    await page.waitForSelector("tbody tr", T);
    say("all", { rows: await rows() });
    await page.selectOption("#f-status", "error");
    await page.click("form.filters button[type=submit]");
    await page.waitForURL(/status=error/, T);
    await page.waitForSelector("tbody tr", T);
    say("status", { rows: await rows(), url: page.url() });
    await page.goto(`${base}/inspect?tool=search&has_error=true`);
    await page.waitForSelector("tbody tr", T);
    say("tool", { rows: await rows(), tool: await page.inputValue("#f-tool") });
    await page.goto(`${base}/inspect?error_code=e`);
    await page.waitForSelector("tbody tr", T);
    say("code", { rows: await rows(), code: await page.inputValue("#f-error_code"),
                  status: await page.$eval("tbody tr .status", (n) => n.textContent) });
    await page.goto(`${base}/inspect?thread_id=nobody`);
    await page.waitForFunction(() => document.body.innerText.includes("No runs match"), null, T);
    say("none", { rows: await rows() });
    // The live list: the running run's event count moves without a reload.
    await page.goto(`${base}/inspect?thread_id=${encodeURIComponent(args[0])}`);
    await page.waitForSelector("tbody tr", T);
    const before = await page.$eval("tbody tr .events", (n) => n.textContent);
    say("live-list", { before });
    await go();
    await page.waitForFunction((b) => {
      const row = document.querySelector("tbody tr");
      return row && row.querySelector(".events").textContent !== b && row.querySelector(".status").textContent === "finished";
    }, before, T);
    say("live-list-after", { events: await page.$eval("tbody tr .events", (n) => n.textContent) });
  } else if (scenario === "live") {
    const [run] = args;
    await page.goto(`${base}/inspect/runs/${run}`);
    await page.waitForSelector(".conversation", T);
    await page.evaluate(() => { window.__sameDocument = true; });
    await page.waitForFunction(() => document.querySelector(".live.on"), null, T);
    say("loaded", { text: await conversation() });
    await go();  // text and half the arguments are appended
    await page.waitForFunction(() => {
      const pre = document.querySelector('[data-tool-call-id="c1"] [data-path="/content"] pre');
      return pre && pre.textContent.includes("import");
    }, null, T);
    say("half", { text: await conversation(), content: await argText("c1", "/content"), path: await argText("c1", "/filePath") });
    await go();  // the connection is cut, the rest appended, the run closed
    await page.waitForFunction(() => document.querySelector(".live.off") && document.body.innerText.includes("Done."), null, T);
    await page.waitForFunction(() => document.querySelector(".conversation").innerText.includes("wrote it"), null, T);
    say("closed", {
      text: await conversation(),
      content: await argText("c1", "/content"),
      sameDocument: await page.evaluate(() => window.__sameDocument === true),
      timeline: await page.$$eval(".timeline li", (lis) => lis.map((li) => Number(li.dataset.seq))),
      status: await page.$eval(".status", (n) => n.textContent),
    });
    // A click shows the chunk exactly as stored.
    await page.click('.timeline li[data-seq="2"] button');
    await page.waitForFunction(() => { const pre = document.querySelector('.timeline li[data-seq="2"] pre.raw'); return pre && pre.dataset.loaded; }, null, T);
    say("raw", { raw: await page.$eval('.timeline li[data-seq="2"] pre.raw', (n) => n.textContent) });
  } else if (scenario === "at") {
    const [run, at] = args;
    await page.goto(`${base}/inspect/runs/${run}?at=${at}`);
    await page.waitForSelector(".conversation", T);
    const visible = () => page.$$eval(".timeline li", (lis) => lis.filter((li) => getComputedStyle(li).display !== "none").map((li) => Number(li.dataset.seq)));
    say("at", { text: await conversation(), visible: await visible(), slider: await page.inputValue("#at") });
    await page.focus("#at");
    await page.keyboard.press("End");
    await page.waitForFunction(() => !location.search.includes("at="), null, T);
    await page.waitForFunction(() => document.querySelector(".conversation").innerText.includes("Done."), null, T);
    say("end", { text: await conversation(), visible: await visible() });
  } else if (scenario === "xss") {
    const [run] = args;
    await page.goto(`${base}/inspect/runs/${run}`);
    await page.waitForSelector(".card.tool-result", T);
    await page.waitForFunction(() => document.querySelectorAll(".timeline li").length > 5, null, T);
    // Open every raw chunk too: the stored text is shown, never run.
    for (const button of await page.$$(".timeline li button")) await button.click();
    await page.waitForFunction(() => [...document.querySelectorAll("pre.raw")].every((p) => p.dataset.loaded), null, T);
    await page.goto(`${base}/inspect/threads/t-xss`);
    await page.waitForSelector(".conversation .message", T);
    await page.goto(`${base}/inspect/runs/${run}`);
    await page.waitForSelector(".card.tool-result", T);
    say("xss", {
      flags: await page.evaluate(() => [window.__xss, window.__xss2, window.__xss3, window.__xss4]),
      text: await conversation(),
      images: await page.$$eval("main img", (imgs) => imgs.length),
      scripts: await page.$$eval("main script", (s) => s.length),
      hrefs: await page.$$eval("main a", (as) => as.map((a) => a.getAttribute("href"))),
    });
  } else if (scenario === "key") {
    const [key, run] = args;
    await page.goto(`${base}/inspect`);
    await page.waitForSelector("#key-dialog[open]", T);
    await page.fill("#key-input", key);
    await page.press("#key-input", "Enter");
    await page.waitForSelector("tbody tr", T);
    say("listed", { rows: await rows(), stored: await page.evaluate(() => sessionStorage.getItem("agent-replay.key") !== null) });
    await page.click(`a[href="/inspect/runs/${run}"]`);
    await page.waitForSelector(".conversation .message", T);
    say("run", { asked: await page.$eval("#key-dialog", (d) => d.open), text: await conversation() });
  } else if (scenario === "eventsource") {
    // The browser's own EventSource with named events, and its own reconnect: the server
    // ends the stream, EventSource comes back with Last-Event-ID and gets 204 (stop).
    const [run] = args;
    await page.goto(`${base}/inspect`);
    const got = await page.evaluate((r) => new Promise((resolve) => {
      const seen = [];
      const source = new EventSource(`/v1/runs/${r}/stream?events=named&types=TEXT_MESSAGE_*`);
      source.addEventListener("TEXT_MESSAGE_CONTENT", (e) => seen.push([e.lastEventId, JSON.parse(e.data).delta]));
      source.addEventListener("TEXT_MESSAGE_END", (e) => seen.push([e.lastEventId, "END"]));
      source.onmessage = (e) => seen.push(["unnamed", e.data]);
      source.onerror = () => { if (source.readyState === EventSource.CLOSED) resolve(seen); };
    }), run);
    say("eventsource", { seen: got });
  } else if (scenario === "thread") {
    // The thread page follows the thread stream: a run made later joins the list, and
    // its end redraws its row and the transcript, without a reload.
    const [thread] = args;
    const runs = () => page.$$eval("ol.runs li", (lis) => lis.map((li) => [li.dataset.runId, li.querySelector(".status").textContent]));
    await page.goto(`${base}/inspect/threads/${encodeURIComponent(thread)}`);
    await page.waitForSelector("ol.runs li", T);
    await page.evaluate(() => { window.__sameDocument = true; });
    say("loaded", { runs: await runs() });
    await go();  // the first run ends and a second starts
    await page.waitForFunction(() => document.querySelectorAll("ol.runs li").length === 2, null, T);
    say("announced", { runs: await runs() });
    await go();  // the second run finishes
    await page.waitForFunction(() => document.querySelector("ol.runs li:nth-child(2) .status").textContent === "finished"
      && document.querySelector(".thread-transcript").innerText.includes("Second answer."), null, T);
    say("finished", {
      runs: await runs(),
      heading: await page.$eval("h2", (n) => n.textContent),
      transcript: await page.$eval(".thread-transcript", (n) => n.innerText),
      sameDocument: await page.evaluate(() => window.__sameDocument === true),
    });
  } else if (scenario === "integrity") {
    // A run's state, verified again after the test alters it, then its thread's.
    const [run, thread] = args;
    await page.goto(`${base}/inspect/runs/${run}`);
    await page.waitForSelector(".integrity.intact", T);
    say("intact", { text: await page.$eval(".integrity", (n) => n.textContent) });
    await go();  // a stored chunk of the run is changed
    await page.click("button.verify");
    await page.waitForSelector(".integrity.altered", T);
    say("altered", { text: await page.$eval(".integrity", (n) => n.textContent) });
    await page.goto(`${base}/inspect/threads/${thread}`);
    await page.waitForSelector("#verify-thread", T);
    await page.click("#verify-thread");
    await page.waitForSelector(".verify-summary.altered", T);
    say("thread", {
      summary: await page.$eval(".verify-summary", (n) => n.textContent),
      runs: await page.$$eval("ol.runs li", (lis) => lis.map((li) => [li.dataset.runId, li.querySelector(".integrity").textContent])),
    });
  } else if (scenario === "phone") {
    const [run] = args;
    const phone = await browser.newContext({ viewport: { width: 375, height: 740 }, colorScheme: "dark" });
    const small = await phone.newPage();
    await small.goto(`${base}/inspect/runs/${run}`);
    await small.waitForSelector(".conversation .message", T);
    say("phone", {
      overflow: await small.evaluate(() => document.documentElement.scrollWidth - window.innerWidth),
      background: await small.evaluate(() => getComputedStyle(document.body).backgroundColor),
    });
    // Keyboard: Tab reaches the timeline, Enter opens a chunk, j moves on.
    await small.focus('.timeline li[data-seq="1"] button');
    await small.keyboard.press("Enter");
    await small.keyboard.press("j");
    say("keys", {
      expanded: await small.$eval('.timeline li[data-seq="1"] button', (b) => b.getAttribute("aria-expanded")),
      focused: await small.evaluate(() => document.activeElement.closest("li").dataset.seq),
    });
    await phone.close();
  }
  say("done", { problems });
} catch (error) {
  process.stderr.write(`${error.stack || error}\n`);
  const shown = await page.evaluate(() => document.body.innerText).catch(() => "");
  process.stderr.write(`the page showed:\n${shown}\nproblems: ${problems.join("; ")}\n`);
  process.exitCode = 1;
} finally {
  await browser.close();
  // stdin stays open for the next "go": leave without waiting for it.
  process.exit(process.exitCode ?? 0);
}
