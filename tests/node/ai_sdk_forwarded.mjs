// One chat through the AI SDK's own `DefaultChatTransport` as a Next.js page configures it
// for a per-user backend: `headers` (the service's key, the user's cookie and headers) and
// `credentials: "include"`. argv: package (`ai5`, `ai6` or `ai`), the endpoint URL, chat id,
// then the headers as one JSON object. Prints {message} or {error}.
const [pkg, api, chatId, headersJson] = process.argv.slice(2);
const { DefaultChatTransport, readUIMessageStream } = await import(pkg);

const question = { id: "u1", role: "user", parts: [{ type: "text", text: "Who am I?" }] };
const out = {};
try {
  const transport = new DefaultChatTransport({
    api, headers: JSON.parse(headersJson), credentials: "include",
  });
  const stream = await transport.sendMessages({
    chatId, messages: [question], trigger: "submit-message", messageId: undefined,
  });
  let message;
  for await (const m of readUIMessageStream({ stream, terminateOnError: true })) message = m;
  out.message = structuredClone(message);
} catch (error) {
  out.error = String(error?.message ?? error);
}
console.log(JSON.stringify(out));
