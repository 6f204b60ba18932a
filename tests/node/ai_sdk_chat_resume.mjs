// What useChat({ resume: true }) does, with the AI SDK's own Chat class (AbstractChat, the
// base of useChat) and a plain in-memory state: a tab sends a message and closes mid-answer
// (stop()); a new tab starts from GET .../messages and calls resumeStream(), as the hook
// does on mount; a third chat is never interrupted. argv: package, tab-1 base, tab-2 base,
// chat id prefix, agent. Prints each chat's final messages.
import { chatClass, until } from "./ai_sdk_harness.mjs";
const [pkg, baseA, baseB, prefix, agent] = process.argv.slice(2);
const { AbstractChat, DefaultChatTransport } = await import(pkg);

const Chat = chatClass(AbstractChat);

const chat = (base, id, messages) => new Chat({
  id, messages, transport: new DefaultChatTransport({ api: `${base}/v1/ai-sdk/${agent}` }),
});

const out = {};
const plain = chat(baseA, `${prefix}-plain`);
await plain.sendMessage({ text: "Is it cold?" });
out.plain = plain.messages;

const tab1 = chat(baseA, `${prefix}-closed`);
const sending = tab1.sendMessage({ text: "Is it cold?" });
await until(() => tab1.messages.at(-1)?.role === "assistant" && tab1.messages.at(-1).parts[0]?.text,
  "a partial answer");
await tab1.stop();
await sending.catch(() => {});
out.closed = tab1.messages;

const hydrated = await (await fetch(`${baseB}/v1/ai-sdk/${agent}/${prefix}-closed/messages`)).json();
out.hydrated = hydrated;
const tab2 = chat(baseB, `${prefix}-closed`, hydrated);
await tab2.resumeStream();
await until(() => tab2.status === "ready" || tab2.status === "error", "the resumed answer");
out.resumed = tab2.messages;
out.status = tab2.status;
console.log(JSON.stringify(out));
