// The Vercel AI SDK's own DefaultChatTransport against /v1/ai-sdk/{agent}, for one major
// version (argv: package name `ai5` or `ai`). Three chats, the same question:
//   plain   sendMessages, read to the end
//   abort   sendMessages, abort after a few chunks, then reconnectToStream on the other replica
//   cut     sendMessages through a proxy that cuts the connection mid-stream, then
//           reconnectToStream on the other replica
// and a reconnectToStream once nothing is active (null: the server's 204).
// Prints one JSON document: each chat's final assistant message (readUIMessageStream) and
// the chunks the interrupted responses delivered before they stopped.
const [pkg, baseA, baseCut, baseB, prefix] = process.argv.slice(2);
const { DefaultChatTransport, readUIMessageStream } = await import(pkg);

const question = { id: "u1", role: "user", parts: [{ type: "text", text: "Is it cold?" }] };
const transport = (base) => new DefaultChatTransport({ api: `${base}/v1/ai-sdk/demo` });

function send(base, chatId, abortSignal) {
  return transport(base).sendMessages({
    chatId, messages: [question], trigger: "submit-message", messageId: undefined, abortSignal,
  });
}

async function last(stream) {
  let message;
  for await (const m of readUIMessageStream({ stream })) message = m;
  return structuredClone(message);
}

async function firstChunks(stream, count, onCount) {
  const seen = [];
  const reader = stream.getReader();
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      seen.push(value);
      if (seen.length === count) onCount();
    }
  } catch (error) {
    seen.push({ stopped: String(error?.name ?? error) });
  }
  return seen;
}

const out = { pkg };
out.plain = await last(await send(baseA, `${prefix}-plain`));

const controller = new AbortController();
const partial = await firstChunks(await send(baseA, `${prefix}-abort`, controller.signal), 6,
  () => controller.abort());
out.abortedChunks = partial;
const resumed = await transport(baseB).reconnectToStream({ chatId: `${prefix}-abort` });
out.abort = resumed === null ? null : await last(resumed);

const cutChunks = await firstChunks(await send(baseCut, `${prefix}-cut`), -1, () => {});
out.cutChunks = cutChunks;
const afterCut = await transport(baseB).reconnectToStream({ chatId: `${prefix}-cut` });
out.cut = afterCut === null ? null : await last(afterCut);

out.idle = await transport(baseB).reconnectToStream({ chatId: `${prefix}-plain` });
console.log(JSON.stringify(out));
