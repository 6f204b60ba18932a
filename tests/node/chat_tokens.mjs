// TanStack AI's ChatClient against /v1/chat/demo on a service that requires keys, holding a
// short-lived chat token: the token is in the adapter's `headers`, and `tokenFetch` (the
// README's fetchClient wrapper) gets a fresh one when a reconnect finds it expired.
//
//   node chat_tokens.mjs BASE_URL THREAD ADMIN_KEY
//
// Sends one message. Prints "EXPIRED" once the service refuses the token as expired while
// the answer still streams, then waits for a line on stdin (the test cuts the connection
// before sending it). Prints one JSON object at the end: the chunks the client yielded, its
// messages, every request the wrapper sent (phase, method, status, Last-Event-ID, token),
// and the tokens minted.
import { createInterface } from "node:readline";
import { ChatClient, fetchServerSentEvents } from "@tanstack/ai-client";
import { tokenFetch } from "./token_fetch.mjs";

const [base, threadId, adminKey] = process.argv.slice(2);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const DEADLINE_MS = 60000;

function until(predicate, what) {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const tick = () => {
      if (predicate()) resolve();
      else if (Date.now() - started > DEADLINE_MS) reject(new Error(`timed out: ${what}`));
      else setTimeout(tick, 10);
    };
    tick();
  });
}

// The app's backend: it holds the admin key and mints a read+chat token for the thread.
const minted = [];
async function appBackendToken() {
  const r = await fetch(`${base}/v1/tokens`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${adminKey}` },
    body: JSON.stringify({ thread_id: threadId, scopes: ["read", "chat"] }),
  });
  if (r.status !== 201) throw new Error(`minting refused: ${r.status} ${await r.text()}`);
  const { token } = await r.json();
  minted.push({ phase, token });
  return token;
}

// Every request the adapter sends through the wrapper, as the service answered it.
let phase = "before";
const sent = [];
const recording = async (input, init) => {
  const headers = new Headers(init.headers);
  const response = await fetch(input, init);
  sent.push({
    phase, method: init.method ?? "GET", status: response.status,
    lastEventId: headers.get("Last-Event-ID"),
    token: (headers.get("Authorization") || "").replace(/^Bearer /, ""),
  });  // fmt: skip
  return response;
};
const fetchClient = tokenFetch(appBackendToken, recording);

const chunks = [];
const client = new ChatClient({
  connection: fetchServerSentEvents(`${base}/v1/chat/demo`, async () => ({
    headers: { Authorization: `Bearer ${await fetchClient.token()}` },
    fetchClient,
    reconnect: { delayMs: 50 },
  })),
  threadId,
  onChunk: (chunk) => chunks.push(chunk),
});

const sending = client.sendMessage("Is it cold in Oslo?");
await until(() => chunks.some((c) => c.type === "TEXT_MESSAGE_CONTENT"), "the first deltas");
// Wait until the service itself refuses the token as expired...
const first = await fetchClient.token();
for (const started = Date.now(); ;) {
  const r = await fetch(`${base}/v1/chat/demo?threadId=${encodeURIComponent(threadId)}`,
                        { headers: { Authorization: `Bearer ${first}` } });  // fmt: skip
  const body = await r.json();
  if (r.status === 401 && body.error.code === "token_expired") break;
  if (Date.now() - started > DEADLINE_MS) throw new Error(`the token never expired: ${r.status}`);
  await new Promise((resolve) => setTimeout(resolve, 100));
}
// ...while the open stream goes on.
const seenAtExpiry = chunks.length;
await until(() => chunks.length > seenAtExpiry, "a chunk after the token expired");
const finishedBeforeCut = chunks.some((c) => c.type === "RUN_FINISHED");
process.stdout.write("EXPIRED\n");
await lines.next();  // the test has cut the connection
phase = "after";
await Promise.race([sending, until(() => false, "the resumed run")]);
await until(() => !client.getIsLoading(), "the client to settle");
const result = { chunks, messages: client.getMessages(), sent, minted, first, finishedBeforeCut,
                 error: client.getError()?.message ?? null };  // fmt: skip
client.dispose();
process.stdout.write(JSON.stringify(result) + "\n");
process.exit(0);
