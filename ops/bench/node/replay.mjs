// Reference replay: drive @tanstack/ai's StreamProcessor the way ChatClient
// does (prepareAssistantMessage, restoreInboundChunk + processChunk per chunk,
// finalizeStream at the end of the stream).
//
//   node replay.mjs FILE.jsonl              final UIMessage[] as JSON
//   node replay.mjs --snapshots FILE.jsonl  one line per chunk, then "finalize"
//   node replay.mjs --bench FILE.jsonl      {"chunks", "seconds", "rssPeakMB"}
//
// Lines are split on "\n" only; blank lines are skipped. --bench times only
// the processing (the file is parsed before the clock starts).
import { readFileSync } from "node:fs";
import { StreamProcessor, restoreInboundChunk } from "@tanstack/ai/client";

const args = process.argv.slice(2);
const mode = args[0]?.startsWith("--") ? args.shift() : "--final";
const chunks = readFileSync(args[0], "utf8")
  .split("\n")
  .filter((line) => line.trim() !== "")
  .map((line) => JSON.parse(line));

// Silence the reference's console warnings (dropped ui-resource, RUN_ERROR
// without message...): stdout carries the result.
console.warn = () => {};
console.error = () => {};

const processor = new StreamProcessor();
processor.prepareAssistantMessage();

if (mode === "--bench") {
  const start = process.hrtime.bigint();
  for (const chunk of chunks) processor.processChunk(restoreInboundChunk(chunk));
  processor.finalizeStream();
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const rssPeakMB = process.resourceUsage().maxRSS / 1024;
  process.stdout.write(JSON.stringify({ chunks: chunks.length, seconds, rssPeakMB }) + "\n");
} else if (mode === "--snapshots") {
  const out = [];
  chunks.forEach((chunk, index) => {
    const type = chunk.type;
    processor.processChunk(restoreInboundChunk(chunk));
    out.push(JSON.stringify({ index, type, messages: processor.getMessages() }));
  });
  processor.finalizeStream();
  out.push(JSON.stringify({ index: "finalize", messages: processor.getMessages() }));
  process.stdout.write(out.join("\n") + "\n");
} else {
  for (const chunk of chunks) processor.processChunk(restoreInboundChunk(chunk));
  processor.finalizeStream();
  process.stdout.write(JSON.stringify(processor.getMessages()) + "\n");
}
