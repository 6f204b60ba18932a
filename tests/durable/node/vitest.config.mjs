// Only our file that calls runConformanceTests; the suite's long-poll tests wait ~20 s.
export default { test: { include: ["conformance.test.mjs"], testTimeout: 60_000, hookTimeout: 60_000 } }
