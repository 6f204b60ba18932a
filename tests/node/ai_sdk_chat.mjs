// One chat through one AI SDK major's own transport (sendMessages, readUIMessageStream).
// argv: package (`ai5` or `ai`), the endpoint URL (with or without ?approvals=true), chat id.
// Prints {message} (readUIMessageStream's last) or {error} (the client refused the stream).
const [pkg, api, chatId] = process.argv.slice(2);
const { DefaultChatTransport, readUIMessageStream } = await import(pkg);

const question = { id: "u1", role: "user", parts: [{ type: "text", text: "Delete it" }] };
const out = {};
try {
  const stream = await new DefaultChatTransport({ api }).sendMessages({
    chatId, messages: [question], trigger: "submit-message", messageId: undefined,
  });
  let message;
  for await (const m of readUIMessageStream({ stream, terminateOnError: true })) message = m;
  out.message = structuredClone(message);
} catch (error) {
  out.error = String(error?.message ?? error);
}
console.log(JSON.stringify(out));
