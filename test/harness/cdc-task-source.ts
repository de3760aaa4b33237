/**
 * The scripted source of the CDC task tests (test/integration/cdc-task.test.ts): what the child
 * processes register, from the parameters the parent passes in TIDEMARK_TEST_CDC.
 */
import {
  generateScript,
  type ScriptedDriverRegistration,
  type ScriptParams,
  scriptedDriver,
} from './scripted-source.js';

export interface CdcTaskSource {
  readonly script: ScriptParams;
  /** The scripted server's durable state. */
  readonly dir: string;
  /** A delay before every reader event, so a capture lasts long enough to be stopped. */
  readonly delayMs?: number;
  readonly rowsPerEvent?: number;
}

/** The scripted driver registration TIDEMARK_TEST_CDC describes. */
export function scriptedFromEnv(): ScriptedDriverRegistration {
  const text = process.env.TIDEMARK_TEST_CDC;
  if (!text) throw new Error('TIDEMARK_TEST_CDC is not set');
  const cfg = JSON.parse(text) as CdcTaskSource;
  return scriptedDriver({
    script: generateScript(cfg.script),
    dir: cfg.dir,
    reader: {
      ...(cfg.delayMs ? { delayMs: cfg.delayMs } : {}),
      ...(cfg.rowsPerEvent ? { rowsPerEvent: cfg.rowsPerEvent } : {}),
    },
  });
}
