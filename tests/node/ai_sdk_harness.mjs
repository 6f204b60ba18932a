// What the ai_sdk_*.mjs harnesses share: useChat without React, that is the AI SDK's own
// Chat class (AbstractChat, the base of useChat) over a plain in-memory state, for the
// major the harness imported; and a wait for a condition on it.

// `AbstractChat` comes from the package the harness was given (`ai5`, `ai6` or `ai`).
export function chatClass(AbstractChat) {
  class State {
    constructor(messages) { this.messages = messages; this.status = "ready"; this.error = undefined; }
    pushMessage(m) { this.messages = [...this.messages, m]; }
    popMessage() { this.messages = this.messages.slice(0, -1); }
    replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), this.snapshot(m), ...this.messages.slice(i + 1)]; }
    snapshot(v) { return structuredClone(v); }
  }
  return class Chat extends AbstractChat {
    constructor({ messages = [], ...options }) { super({ ...options, state: new State(messages) }); }
  };
}

// What a chat shows: its messages, status and error.
export const shown = (c) => ({ messages: c.messages, status: c.status, error: c.error?.message ?? null });

// Polls `check` until it holds; past `timeout` ms it throws, naming `what`.
export async function until(check, what, { timeout = 30000, every = 10 } = {}) {
  const deadline = Date.now() + timeout;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}
