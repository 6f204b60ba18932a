// The protocol's own conformance suite, against the server at DS_URL.
// (The package's CLI finds no tests: vitest excludes node_modules, upstream issue #284.)
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

if (!process.env.DS_URL) throw new Error("DS_URL (the service's base URL) is required")
runConformanceTests({ baseUrl: process.env.DS_URL })
