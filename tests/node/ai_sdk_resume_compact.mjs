// useChat({ resume: true }) reopened at points the test chooses: the AI SDK's own Chat class
// (AbstractChat, the base of useChat) with the stock DefaultChatTransport, whose
// reconnectToStream is wrapped only to keep a copy of each chunk the client reads.
//
// argv: package, base A, base B, chat id, agent. Protocol on stdio, one line each:
//   prints "ready" once an uninterrupted chat (resumed while the run was empty) reads;
//   reads "tab": opens a new chat (alternating replicas) from GET .../messages, calls
//     resumeStream() as the hook does on mount, prints "opened" once its first chunk is read;
//   reads "end": waits for every chat to finish, prints
//     {"plain": {messages, chunks, status}, "tabs": [{messages, chunks, status}, ...]}.
import readline from "node:readline";
import { chatClass, until as untilWithin } from "./ai_sdk_harness.mjs";

const [pkg, baseA, baseB, chatId, agent] = process.argv.slice(2);
const { AbstractChat, DefaultChatTransport } = await import(pkg);

const Chat = chatClass(AbstractChat);
// Polled more often: the test holds the run still until a tab's first chunk is read, so
// the sooner it is seen the less the run pauses; longer, for a run of a few thousand events.
const until = (check, what) => untilWithin(check, what, { timeout: 60000, every: 5 });

// The stock transport; the client reads one branch of a tee, the other is kept.
class Recording extends DefaultChatTransport {
  constructor(options, chunks) { super(options); this.chunks = chunks; this.recorded = null; }
  async reconnectToStream(options) {
    const stream = await super.reconnectToStream(options);
    if (stream == null) return null;
    const [kept, read] = stream.tee();
    this.recorded = (async () => {
      const reader = kept.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        this.chunks.push(value);
      }
    })();
    return read;
  }
}

function open(base, messages) {
  const chunks = [];
  const transport = new Recording({ api: `${base}/v1/ai-sdk/${agent}` }, chunks);
  const chat = new Chat({ id: chatId, messages, transport });
  // Done once the client has read the stream and the copy holds all of it.
  const done = chat.resumeStream().then(() => transport.recorded);
  return { chat, chunks, done };
}

const failed = (tab) => tab.chat.status === "error";
const plain = open(baseA, []);
await until(() => plain.chunks.length > 0 || failed(plain), "the uninterrupted chat's start");
console.log("ready");

const tabs = [];
for await (const line of readline.createInterface({ input: process.stdin })) {
  if (line === "end") break;
  const base = tabs.length % 2 ? baseA : baseB;
  const hydrated = await (await fetch(`${base}/v1/ai-sdk/${agent}/${chatId}/messages`)).json();
  const tab = open(base, hydrated);
  tabs.push(tab);
  await until(() => tab.chunks.length > 0 || failed(tab), `tab ${tabs.length}'s first chunk`);
  console.log("opened");
}
process.stdin.destroy(); // "end" is the last line: nothing to wait for there

await Promise.all([plain.done, ...tabs.map((t) => t.done)]);
const result = ({ chat, chunks }) => ({
  messages: chat.messages, chunks, status: chat.status, error: chat.error?.message,
});
console.log(JSON.stringify({ plain: result(plain), tabs: tabs.map(result) }));
