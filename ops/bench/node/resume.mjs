// useChat({ resume: true })'s client side of a resume, for ops/bench/resume.py: the AI SDK's
// own Chat class (AbstractChat, the base of useChat) with the stock DefaultChatTransport and
// a state that snapshots the message on every update, as @ai-sdk/react's does.
//
//   node resume.mjs BASE AGENT CHAT QUERY TEXT_LENGTH ARGUMENT_LENGTH
//
// Resumes the chat and waits until its message holds the run so far (the text part's
// TEXT_LENGTH characters and the tool input's `text` of ARGUMENT_LENGTH), then stops the
// response. Prints {"ms": wall time, "cpuMs": this process's CPU time, "updates": n}.
import { AbstractChat, DefaultChatTransport } from "ai";

const [base, agent, chatId, query, textLength, argumentLength] = process.argv.slice(2);

let reached = null; // resolves the wait for the edge, once
let updates = 0;
const atEdge = (message) => {
  const text = message.parts.find((p) => p.type === "text");
  const tool = message.parts.find((p) => p.type === "tool-write");
  return text?.text.length === Number(textLength)
    && tool?.input?.text?.length === Number(argumentLength);
};

class State {
  constructor() { this.messages = []; this.status = "ready"; this.error = undefined; }
  pushMessage(m) { this.messages = [...this.messages, m]; }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) {
    this.messages = [...this.messages.slice(0, i), this.snapshot(m), ...this.messages.slice(i + 1)];
    updates += 1;
    if (reached !== null && atEdge(m)) { reached(); reached = null; }
  }
  snapshot(v) { return structuredClone(v); }
}

class Chat extends AbstractChat {
  constructor(options) { super({ ...options, state: new State() }); }
}

const chat = new Chat({
  id: chatId,
  transport: new DefaultChatTransport({
    api: `${base}/v1/ai-sdk/${agent}`,
    // The stock URL; QUERY only to ask for the replay this is compared with.
    prepareReconnectToStreamRequest: ({ api, id }) => ({ api: `${api}/${id}/stream${query}` }),
  }),
});
const edge = new Promise((resolve) => { reached = resolve; });
const cpu = process.cpuUsage();
const start = performance.now();
const resuming = chat.resumeStream();
await edge;
const ms = performance.now() - start;
const used = process.cpuUsage(cpu);
await chat.stop();
await resuming.catch(() => {});
console.log(JSON.stringify({ ms, cpuMs: (used.user + used.system) / 1000, updates }));
