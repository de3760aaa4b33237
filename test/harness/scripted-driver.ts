/**
 * A driver kind tests register in-process (shared/drivers/registry.ts `registerDriver`) to judge
 * the mode gate with capabilities no built-in kind has yet. It opens nothing: a test that reaches
 * `openCdc` or `openIncremental` has gone past what it meant to test.
 */
import type { Capabilities } from '../../shared/contracts/source.js';
import type { DriverRegistration } from '../../shared/drivers/registry.js';

/** Capabilities a kind with a gapless log reader declares. */
export const STREAMING: Capabilities = {
  snapshot: false,
  chunkQuery: false,
  stream: true,
  maxConnections: 0,
  modes: ['cdc'],
  beforeImage: true,
  monotonicSequence: true,
  recoverablePosition: true,
};

/** A registration of `kind`: streaming capabilities with `overrides`; `openCdc` unless `reader: false`. */
export function scriptedDriver(
  kind: string,
  overrides: Partial<Capabilities> = {},
  opts: { reader?: boolean } = {},
): DriverRegistration {
  return {
    kind,
    capabilities: { ...STREAMING, ...overrides },
    ...(opts.reader === false
      ? {}
      : {
          async openCdc() {
            throw new Error(`the ${kind} test driver opens nothing`);
          },
        }),
  };
}
