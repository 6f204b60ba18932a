// @ag-ui/client's own HttpAgent (which verifies the event stream as it reads it) on a hosted
// agent whose upstream is an AI SDK backend: the run, mapped from UI message chunks, read as
// AG-UI. argv: the service's base URL, the agent. Prints {messages, types, error}.
import { HttpAgent } from "@ag-ui/client";

const [service, agentName] = process.argv.slice(2);
const agent = new HttpAgent({
  url: `${service}/v1/agents/${agentName}/ag-ui`,
  initialMessages: [{ id: "u1", role: "user", content: "Weather in Paris?" }],
});
const types = [];
let error = null;
try {
  await agent.runAgent({}, { onEvent: ({ event }) => { types.push(event.type); } });
} catch (e) {
  error = String(e?.message ?? e);
}
console.log(JSON.stringify({ messages: structuredClone(agent.messages), types, error }));
