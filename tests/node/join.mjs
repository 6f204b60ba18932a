// Joins a run with TanStack AI's own connection adapters and prints what they yield.
//
//   node join.mjs sse  URL RUN_ID     fetchServerSentEvents(URL).joinRun(RUN_ID)
//   node join.mjs http URL RUN_ID     fetchHttpStream(URL, {Accept: NDJSON}).joinRun(RUN_ID)
//
// One line per yielded chunk on stdout ({"chunk": ...}); a failure ends with
// {"error": NAME, "message": ...} and exit code 1. The adapters reconnect by
// themselves (Last-Event-ID) when the connection drops: that is under test.
import { fetchHttpStream, fetchServerSentEvents } from "@tanstack/ai-client";

const [mode, url, runId] = process.argv.slice(2);
const adapter =
  mode === "sse"
    ? fetchServerSentEvents(url, { reconnect: { delayMs: 20 } })
    : fetchHttpStream(url, {
        headers: { Accept: "application/x-ndjson" },
        reconnect: { delayMs: 20 },
      });

const out = [];
try {
  for await (const chunk of adapter.joinRun(runId)) out.push(JSON.stringify({ chunk }));
  process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
} catch (error) {
  out.push(JSON.stringify({ error: error?.name ?? "Error", message: String(error?.message ?? error) }));
  process.stdout.write(out.join("\n") + "\n");
  process.exitCode = 1;
}
