// An AI SDK chat backend as a Next.js route handler would be one, for one major
// (argv: package `ai5`, `ai6` or `ai`): `streamText` with the package's own mock model (`ai/test`),
// answered by `createUIMessageStreamResponse`, over plain node:http.
//
//   POST /api/chat/<scenario>   the chat request useChat posts; answers the UI message stream
//   POST /release/<chatId>      lets a `gated` answer for that chat go on past its middle
//   GET  /requests              every chat request received so far, in order: {scenario, body,
//                               headers}
//
// Prints {"port": N} once listening. Scenarios (the model's stream is scripted, the same
// on every request):
//   full     two steps: reasoning, text, a tool call with streamed input (executed), a tool
//            call that did not stream its input and whose tool throws, a source, a file;
//            then text. Data parts (one updated in place, one transient) and message
//            metadata on start and finish.
//   error    some text, then the model fails mid-stream
//   gated    one long text, held after its middle until /release/<chatId>
import http from "node:http";

const [pkg] = process.argv.slice(2);
const ai = await import(pkg);
const mocks = await import(`${pkg}/test`);
const { z } = await import("zod");
// Each major's own mock: LanguageModelV2 (5), V3 (6), V4 (7).
const major = { ai5: 5, ai6: 6 }[pkg] ?? 7;
const v5 = major === 5;
const Model = { 5: mocks.MockLanguageModelV2, 6: mocks.MockLanguageModelV3 }[major]
  ?? mocks.MockLanguageModelV4;

const usage = v5
  ? { inputTokens: 3, outputTokens: 10, totalTokens: 13 }
  : {
      inputTokens: { total: 3, noCache: 3, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: 10, text: 10, reasoning: undefined },
    };
const finish = (reason) => ({
  type: "finish", finishReason: v5 ? reason : { unified: reason, raw: reason }, usage,
});
const text = (id, ...deltas) => [
  { type: "text-start", id },
  ...deltas.map((delta) => ({ type: "text-delta", id, delta })),
  { type: "text-end", id },
];

const gates = new Map();
function gate(chatId) {
  if (!gates.has(chatId)) {
    let open;
    const opened = new Promise((resolve) => { open = resolve; });
    gates.set(chatId, { opened, open });
  }
  return gates.get(chatId);
}

// A model stream of `parts`; `hold` (a promise) is awaited before part number `at`.
function stream(parts, hold, at) {
  let index = 0;
  return new ReadableStream({
    async pull(controller) {
      if (hold && index === at) await hold;
      if (index < parts.length) controller.enqueue(parts[index++]);
      else controller.close();
    },
  });
}

function scripted(scenario, chatId) {
  if (scenario === "full") {
    const first = [
      { type: "stream-start", warnings: [] },
      { type: "reasoning-start", id: "r1" },
      { type: "reasoning-delta", id: "r1", delta: "The user wants " },
      { type: "reasoning-delta", id: "r1", delta: "the weather." },
      { type: "reasoning-end", id: "r1" },
      ...text("t1", "Let me ", "look that up."),
      { type: "tool-input-start", id: "call-1", toolName: "weather" },
      { type: "tool-input-delta", id: "call-1", delta: '{"city":' },
      { type: "tool-input-delta", id: "call-1", delta: ' "Paris"}' },
      { type: "tool-input-end", id: "call-1" },
      { type: "tool-call", toolCallId: "call-1", toolName: "weather", input: '{"city": "Paris"}' },
      { type: "tool-call", toolCallId: "call-2", toolName: "broken", input: '{"why":"test"}' },
      { type: "source", sourceType: "url", id: "src-1", url: "https://example.com/paris",
        title: "Paris weather" },
      { type: "file", mediaType: "text/plain",
        data: major < 7 ? "aGk=" : { type: "data", data: "aGk=" } },
      finish("tool-calls"),
    ];
    const second = [
      { type: "stream-start", warnings: [] },
      // The id the first step used, as a provider numbering each step's parts from 0 does.
      ...text("t1", "It is ", "21 degrees ", "in Paris."),
      finish("stop"),
    ];
    return [first, second];
  }
  if (scenario === "error") {
    return [[
      { type: "stream-start", warnings: [] },
      { type: "text-start", id: "t1" },
      { type: "text-delta", id: "t1", delta: "Starting" },
      { type: "error", error: "model overloaded" },
    ]];
  }
  const deltas = Array.from({ length: 40 }, (_, i) => `word${i} `);
  return [[{ type: "stream-start", warnings: [] }, ...text("t1", ...deltas), finish("stop")]];
}


async function answer(scenario, body) {
  const steps = scripted(scenario, body.id);
  const hold = scenario === "gated" ? gate(body.id).opened : undefined;
  let call = 0;
  const model = new Model({
    doStream: async () => {
      const parts = steps[Math.min(call++, steps.length - 1)];
      return { stream: stream(parts, hold, 22) };
    },
  });
  const tools = {
    weather: ai.tool({
      description: "the weather in a city",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => ({ city, temperature: 21 }),
    }),
    broken: ai.tool({
      description: "always fails",
      inputSchema: z.object({ why: z.string() }),
      execute: async () => { throw new Error("the tool is broken"); },
    }),
  };
  const result = ai.streamText({
    model,
    prompt: "weather?",
    tools,
    stopWhen: ai.stepCountIs(3),
  });
  const uiStream = ai.createUIMessageStream({
    execute: ({ writer }) => {
      writer.write({ type: "data-status", id: "status", data: { state: "working" } });
      writer.write({ type: "data-notice", data: "transient note", transient: true });
      writer.merge(result.toUIMessageStream({
        sendReasoning: true,
        sendSources: true,
        messageMetadata: ({ part }) => {
          if (part.type === "start") return { model: "mock", chat: body.id };
          if (part.type === "finish") return { finishedBy: "mock", steps: 2 };
          return undefined;
        },
        onFinish: () => {},
      }));
    },
    onError: (error) => String(error?.message ?? error),
  });
  return ai.createUIMessageStreamResponse({ stream: uiStream });
}

const requests = [];
const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const raw = Buffer.concat(chunks).toString();
  const [, route, name] = req.url.match(/^\/(api\/chat|release|requests)\/?([^/?]*)/) ?? [];
  try {
    if (req.method === "GET" && route === "requests") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(requests));
      return;
    }
    if (req.method === "POST" && route === "release") {
      gate(decodeURIComponent(name)).open();
      res.writeHead(204).end();
      return;
    }
    if (req.method === "POST" && route === "api/chat") {
      const body = JSON.parse(raw);
      requests.push({ scenario: name, body, headers: req.headers });
      const response = await answer(name, body);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      for await (const part of response.body) res.write(part);
      res.end();
      return;
    }
    res.writeHead(404).end();
  } catch (error) {
    res.writeHead(500).end(String(error?.stack ?? error));
  }
});
server.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ port: server.address().port }));
});
