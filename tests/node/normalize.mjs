// TanStack AI's own server-side chunk normalization, for the differential test of
// `agent-replay project --normalize`: one JSON chunk per stdin line in, one JSON array per line out.
import { normalizeStreamChunk } from "@tanstack/ai";
import { createInterface } from "node:readline";

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  process.stdout.write(JSON.stringify(normalizeStreamChunk(JSON.parse(line))) + "\n");
}
