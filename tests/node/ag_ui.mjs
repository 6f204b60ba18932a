// @ag-ui/client's own HttpAgent against an AG-UI upstream directly and through
// POST /v1/agents/{agent}/ag-ui. argv: upstreamUrl serviceA cutA serviceB agent runId releaseUrl
//   direct   HttpAgent on the upstream itself
//   through  HttpAgent on the service's endpoint (a new run)
//   cut      HttpAgent through a proxy that cuts the connection mid-run (runId fixed)
//   joined   a second HttpAgent, knowing nothing, joins that run on the other replica with
//            ?compact=snapshot and follows it to the end; once its snapshot arrives it
//            POSTs releaseUrl, which lets a held upstream run go on (tests/clients/upstream.py)
// Prints one JSON document: each agent's final messages (and the joiner's event types).
import { HttpAgent } from "@ag-ui/client";

const [upstream, serviceA, cutA, serviceB, agentName, runId, releaseUrl] = process.argv.slice(2);
const question = { id: "u1", role: "user", content: "Is it cold?" };
const endpoint = (base, query = "") => `${base}/v1/agents/${agentName}/ag-ui${query}`;

async function run(url, options = {}, initial = [question], onSnapshot = null) {
  const agent = new HttpAgent({ url, initialMessages: structuredClone(initial) });
  const types = [];
  let error = null;
  const onEvent = ({ event }) => {
    types.push(event.type);
    if (event.type === "MESSAGES_SNAPSHOT" && onSnapshot) onSnapshot();
  };
  try {
    await agent.runAgent(options, { onEvent });
  } catch (e) {
    error = String(e?.message ?? e);
  }
  return { messages: structuredClone(agent.messages), types, error };
}

const out = { uncaught: [] };
// A cut connection also surfaces as an uncaught error from the client's fetch stream:
// record it instead of letting Node exit on it.
process.on("uncaughtException", (e) => out.uncaught.push(String(e?.message ?? e)));
process.on("unhandledRejection", (e) => out.uncaught.push(String(e?.message ?? e)));
out.direct = await run(upstream);
out.through = await run(endpoint(serviceA));
out.cut = await run(endpoint(cutA), { runId });
const release = () => fetch(releaseUrl, { method: "POST" }).catch((e) => out.uncaught.push(String(e)));
out.joined = await run(endpoint(serviceB, "?compact=snapshot"), { runId }, [], release);
console.log(JSON.stringify(out));
