// Every UI message stream chunk type one AI SDK major knows (argv: package `ai5`, `ai6` or
// `ai`), pushed to the service (`?format=ai-sdk` appends) and served to useChat's Chat class
// (AbstractChat, the base of useChat) by the service, against the same chunks served to it
// directly by a plain SSE endpoint. argv: package, the service's base URL, a chat id prefix.
// Prints {direct, served}: each chat's messages, status and error.
import http from "node:http";
import { chatClass, shown, until } from "./ai_sdk_harness.mjs";

const [pkg, service, prefix] = process.argv.slice(2);
const { AbstractChat, DefaultChatTransport } = await import(pkg);
const major = { ai5: 5, ai6: 6 }[pkg] ?? 7;

// [the first major that knows the chunk, the chunk]
const ALL = [
  [5, { type: "start", messageId: "upstream-id", messageMetadata: { model: "m" } }],
  [5, { type: "start-step" }],
  [5, { type: "reasoning-start", id: "r1", providerMetadata: { p: { signature: "s" } } }],
  [5, { type: "reasoning-delta", id: "r1", delta: "Think" }],
  [5, { type: "reasoning-end", id: "r1" }],
  [7, { type: "reasoning-file", url: "data:image/png;base64,AA==", mediaType: "image/png" }],
  [5, { type: "text-start", id: "t1" }],
  [5, { type: "text-delta", id: "t1", delta: "Hello " }],
  [5, { type: "text-delta", id: "t1", delta: "world" }],
  [5, { type: "text-end", id: "t1" }],
  [5, { type: "tool-input-start", toolCallId: "c1", toolName: "weather" }],
  [5, { type: "tool-input-delta", toolCallId: "c1", inputTextDelta: '{"city":' }],
  [5, { type: "tool-input-delta", toolCallId: "c1", inputTextDelta: ' "Paris"}' }],
  [5, { type: "tool-input-available", toolCallId: "c1", toolName: "weather",
        input: { city: "Paris" } }],
  [6, { type: "tool-approval-request", approvalId: "a1", toolCallId: "c1" }],
  [5, { type: "tool-output-available", toolCallId: "c1", output: { t: 21 }, preliminary: true }],
  [5, { type: "tool-output-available", toolCallId: "c1", output: "21" }],
  [5, { type: "tool-input-start", toolCallId: "c2", toolName: "bad", dynamic: true }],
  [5, { type: "tool-input-delta", toolCallId: "c2", inputTextDelta: "{nope" }],
  [5, { type: "tool-input-error", toolCallId: "c2", toolName: "bad", input: "{nope",
        errorText: "not JSON", dynamic: true }],
  [5, { type: "tool-input-available", toolCallId: "c3", toolName: "fails", input: { n: 1 } }],
  [5, { type: "tool-output-error", toolCallId: "c3", errorText: "it failed" }],
  [6, { type: "tool-input-available", toolCallId: "c4", toolName: "denied", input: {} }],
  [6, { type: "tool-output-denied", toolCallId: "c4" }],
  [5, { type: "source-url", sourceId: "s1", url: "https://example.com", title: "E" }],
  [5, { type: "source-document", sourceId: "s2", mediaType: "text/plain", title: "D" }],
  [5, { type: "file", url: "data:text/plain;base64,QQ==", mediaType: "text/plain" }],
  [5, { type: "data-weather", id: "w1", data: { t: 21 } }],
  [5, { type: "data-weather", id: "w1", data: { t: 22 } }],
  [5, { type: "data-progress", data: 0.5, transient: true }],
  [5, { type: "data-state", data: { n: 1 } }],
  [5, { type: "data-run.accepted", data: "a data part with a name the service uses" }],
  [5, { type: "message-metadata", messageMetadata: { usage: { inputTokens: 3 } } }],
  [5, { type: "finish-step" }],
  [5, { type: "finish", finishReason: major === 7 ? "interrupted" : "stop",
        messageMetadata: { done: true } }],
];
const chunks = ALL.filter(([since]) => since <= major).map(([, chunk]) => chunk);

const Chat = chatClass(AbstractChat);
const chat = (api, id, messages) => {
  let n = 0;
  return new Chat({ id, messages, generateId: () => `m${++n}`, transport: new DefaultChatTransport({ api }) });
};

// Directly: the chunks as an AI SDK server answers them.
const server = http.createServer(async (req, res) => {
  for await (const _ of req);
  res.writeHead(200, { "content-type": "text/event-stream", "x-vercel-ai-ui-message-stream": "v1" });
  for (const chunk of chunks) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  res.end("data: [DONE]\n\n");
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const direct = chat(`http://127.0.0.1:${server.address().port}/api/chat`, `${prefix}-d`);
await direct.sendMessage({ text: "Everything, please" });
server.close();

// Through the service: pushed to a run on the chat's thread, read back by resumeStream().
const id = `${prefix}-pushed`;
const run = `run-${id}`;
const json = { "content-type": "application/json" };
const check = async (response) => {
  if (!response.ok) throw new Error(`${response.status} ${await response.text()}`);
};
await check(await fetch(`${service}/v1/runs/${run}`, {
  method: "PUT", headers: json, body: JSON.stringify({ thread_id: id }),
}));
await check(await fetch(`${service}/v1/runs/${run}/events?format=ai-sdk`, {
  method: "POST", headers: { "content-type": "application/x-ndjson" },
  body: chunks.map((c) => JSON.stringify(c)).join("\n"),
}));
const served = chat(`${service}/v1/ai-sdk/pushed`, id, [structuredClone(direct.messages[0])]);
const resuming = served.resumeStream();
await until(() => served.messages.length === 2, "the pushed answer");
await check(await fetch(`${service}/v1/runs/${run}/close`, { method: "POST", headers: json }));
await resuming;
await until(() => served.status !== "streaming" && served.status !== "submitted", "the end");
console.log(JSON.stringify({ direct: shown(direct), served: shown(served) }));
