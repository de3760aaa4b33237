/**
 * The V8 flags the CLI's node starts with: the shebang of bin/tidemark.js and the package's
 * `start` and `tidemark` scripts carry exactly these (test/unit/node-flags.test.ts), and the
 * benches start their tidemark children with them (bench/support.ts), as `tidemark run` starts.
 *
 * `--initial-old-space-size=128`: V8 starts with a small old generation and sizes its next
 * full collection from it, and every page allocates tens of MB of column and hand-over buffers
 * outside the JS heap; from a small start that is a full (mark-compact) collection every page
 * or so (26 per 1M rows on the bench table), from 128 MB about 11. Measured: 0.92x the engine
 * time and 0.89x the client CPU of a 1M-row Postgres sync, +20 MiB peak RSS (docs/benchmarks.md,
 * "Issue 15, fourth pass"; decision 0019). It is a start size, not a limit: the heap still grows
 * and shrinks as before. Node refuses it in NODE_OPTIONS, hence the command lines.
 */
export const CLI_NODE_FLAGS = ['--initial-old-space-size=128'] as const;
