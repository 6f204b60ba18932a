// What useChat shows, with the AI SDK's own Chat class (AbstractChat, the base of useChat)
// and its stock DefaultChatTransport, for one major (argv: package `ai5`, `ai6` or `ai`): talking
// to an AI SDK backend (tests/node/ai_sdk_upstream.mjs) directly, and to the service hosting
// it (agents `ai-<scenario>`, "protocol": "ai-sdk"). argv: package, the upstream's base URL,
// the service's base URL, a chat id prefix.
//
//   full, error  one question each way; each chat's messages, status and error
//   gated        directly (let through at once); then through the service: a tab sends,
//                closes mid-answer (stop()), a new tab starts from GET .../messages and
//                calls resumeStream() (useChat({ resume: true }) on mount), and only once
//                it streams is the upstream let past its middle
//   cut          the same, the first tab's connection cut mid-answer by a proxy (argv 5:
//                the service's base URL through it) instead of stopped
// Prints one JSON document.
import { chatClass, shown, until } from "./ai_sdk_harness.mjs";
const [pkg, upstream, service, prefix, cutting] = process.argv.slice(2);
const { AbstractChat, DefaultChatTransport } = await import(pkg);

const Chat = chatClass(AbstractChat);

// The same ids for the user's messages either way (the chat's own generateId).
const chat = (api, id, messages) => {
  let n = 0;
  return new Chat({
    id, messages, generateId: () => `m${++n}`,
    // A field of the transport's `body` option, as an app passes its model choice.
    transport: new DefaultChatTransport({ api, body: { model: "fast" } }),
  });
};

const question = { text: "Weather in Paris?" };

const out = { pkg };
for (const scenario of ["full", "error"]) {
  const direct = chat(`${upstream}/api/chat/${scenario}`, `${prefix}-${scenario}-d`);
  await direct.sendMessage(question);
  const served = chat(`${service}/v1/ai-sdk/ai-${scenario}`, `${prefix}-${scenario}`);
  await served.sendMessage(question);
  out[scenario] = { direct: shown(direct), served: shown(served) };
}

const straight = `${prefix}-gated-d`;
await fetch(`${upstream}/release/${straight}`, { method: "POST" });
const direct = chat(`${upstream}/api/chat/gated`, straight);
await direct.sendMessage(question);

const id = `${prefix}-gated`;
const api = `${service}/v1/ai-sdk/ai-gated`;
const tab1 = chat(api, id);
const sending = tab1.sendMessage(question);
await until(() => tab1.messages.at(-1)?.role === "assistant"
  && tab1.messages.at(-1).parts.some((p) => p.type === "text" && p.text), "a partial answer");
await tab1.stop();
await sending.catch(() => {});
const closed = structuredClone(tab1.messages);

const hydrated = await (await fetch(`${service}/v1/ai-sdk/ai-gated/${id}/messages`)).json();
const tab2 = chat(api, id, hydrated);
const resuming = tab2.resumeStream();
await until(() => tab2.messages.at(-1)?.role === "assistant", "the resumed answer to start");
await fetch(`${upstream}/release/${id}`, { method: "POST" });
await resuming;
await until(() => tab2.status === "ready" || tab2.status === "error", "the resumed answer");
out.gated = { direct: shown(direct), closed, hydrated, resumed: shown(tab2) };

// The same, the first tab's connection cut by a proxy mid-answer instead.
const cutId = `${prefix}-cut`;
const tab3 = chat(`${cutting}/v1/ai-sdk/ai-gated`, cutId);
await tab3.sendMessage(question).catch(() => {});
await until(() => tab3.status === "error" || tab3.status === "ready", "the cut");
const cutShown = shown(tab3);
const tab4 = chat(api, cutId,
  await (await fetch(`${service}/v1/ai-sdk/ai-gated/${cutId}/messages`)).json());
const rejoining = tab4.resumeStream();
await until(() => tab4.messages.at(-1)?.role === "assistant", "the rejoined answer to start");
await fetch(`${upstream}/release/${cutId}`, { method: "POST" });
await rejoining;
await until(() => tab4.status === "ready" || tab4.status === "error", "the rejoined answer");
out.cut = { cut: cutShown, resumed: shown(tab4) };
console.log(JSON.stringify(out));
