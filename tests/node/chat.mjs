// TanStack AI's ChatClient against /v1/chat/demo: a tab closes mid-answer, a new tab resumes.
//
//   node chat.mjs BASE_URL THREAD_CLOSED THREAD_UNINTERRUPTED
//
// 1. Client A sends a message on THREAD_CLOSED and stops (aborts its fetch, as a closed tab
//    does) after the first few assistant deltas.
// 2. Client B, a new ChatClient with persistence on the same thread, hydrates from the server
//    and joins the still-active run, to its end.
// 3. Client U sends the same message on THREAD_UNINTERRUPTED and never disconnects.
// Prints {"a": [...], "b": [...], "u": [...], "runs": {...}} (UIMessages) on stdout.
import { ChatClient, fetchServerSentEvents } from "@tanstack/ai-client";

const [base, closedThread, plainThread] = process.argv.slice(2);
const url = `${base}/v1/chat/demo`;
const QUESTION = "Is it cold in Oslo?";
const DEADLINE_MS = 30000;

function deadline(ms, what) {
  return new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms));
}

function until(predicate, what) {
  return Promise.race([
    new Promise((resolve) => {
      const tick = () => (predicate() ? resolve() : setTimeout(tick, 10));
      tick();
    }),
    deadline(DEADLINE_MS, what),
  ]);
}

function client(threadId, persistence, onChunk) {
  const options = {
    connection: fetchServerSentEvents(url, { reconnect: { delayMs: 50 } }),
    threadId,
    onChunk,
  };
  if (persistence) options.persistence = true;
  return new ChatClient(options);
}

const runs = {};

// 1. The tab that closes.
let deltas = 0;
const a = client(closedThread, false, (chunk) => {
  if (chunk.type === "RUN_STARTED") runs.closed = chunk.runId;
  if (chunk.type === "TEXT_MESSAGE_CONTENT") deltas += 1;
});
const sending = a.sendMessage(QUESTION).catch(() => {});
await until(() => deltas >= 3, "first assistant deltas");
a.stop();
await sending;
const aMessages = a.getMessages();
a.dispose();

// 2. The new tab: hydrate, see the active run, join it from its first event.
let finished = false;
const b = client(closedThread, true, (chunk) => {
  if (chunk.type === "RUN_FINISHED" || chunk.type === "RUN_ERROR") finished = true;
});
// A UI wrapper attaches when its view mounts: hydrate, then join the active run.
b.attach();
await until(() => finished && !b.getIsLoading(), "the rejoined run to finish");
await new Promise((resolve) => setTimeout(resolve, 50));
const bMessages = b.getMessages();
b.dispose();

// 3. A client that never left.
const u = client(plainThread, false, (chunk) => {
  if (chunk.type === "RUN_STARTED") runs.plain = chunk.runId;
});
await Promise.race([u.sendMessage(QUESTION), deadline(DEADLINE_MS, "the uninterrupted run")]);
const uMessages = u.getMessages();
u.dispose();

process.stdout.write(JSON.stringify({ a: aMessages, b: bMessages, u: uMessages, runs }) + "\n");
process.exit(0);
