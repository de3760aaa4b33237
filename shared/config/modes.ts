/**
 * The mode gate: which tables of a spec their source's driver kind can serve, judged on the
 * registry's static capabilities (shared/drivers/registry.ts), without opening anything.
 *
 * A table may be `mode: cdc` only if its kind declares mode `cdc` AND `stream` AND
 * `recoverablePosition` AND has a log reader (`openCdc`); a `mode: incremental` table only if the
 * kind declares `incremental` and can open an incremental source. Anything else is ONE problem
 * per table naming the table, the kind and the alternative.
 *
 * `parseSpec` runs it on every spec, so every entry point refuses what cannot run: `tidemark
 * validate`, `run`, `check`, the Lambda, `cdk synth` (which also calls it on the spec it is
 * given) and the CDC task to come. Owns that one rule; never opens a connection.
 */
import { ConfigError, type ConfigProblem } from '../contracts/errors.js';
import type { Capabilities } from '../contracts/source.js';
import { type DriverRegistration, driver } from '../drivers/registry.js';

/**
 * The part of a spec the gate judges; a parsed `Spec` (shared/config/spec.ts) is one. Declared
 * here rather than imported, so the schema module imports the gate and the gate nothing of it.
 */
export interface ModeGateSpec {
  readonly sources: Readonly<Record<string, { readonly kind: string }>>;
  readonly tables: readonly {
    readonly source: string;
    readonly table: string;
    readonly target?: string | undefined;
    readonly mode: 'incremental' | 'cdc';
  }[];
}

/** What keeps a kind from serving cdc tables, as words; empty when it can. */
export function cdcMissing(reg: Pick<DriverRegistration, 'capabilities' | 'openCdc'>): string[] {
  const c: Capabilities = reg.capabilities;
  const missing: string[] = [];
  if (!c.modes.includes('cdc')) missing.push(`modes ${c.modes.join(', ') || 'none'} (no cdc)`);
  if (!c.stream) missing.push('stream false');
  if (!c.recoverablePosition) missing.push('recoverablePosition false');
  if (!reg.openCdc) missing.push('no log reader');
  return missing;
}

/** Every table the spec's kinds cannot serve in its mode: one problem per table. */
export function checkModes(spec: ModeGateSpec): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  spec.tables.forEach((t, i) => {
    const source = spec.sources[t.source];
    if (!source) return; // parseSpec reports the unknown source itself
    let reg: DriverRegistration;
    try {
      reg = driver(source.kind);
    } catch (e) {
      problems.push({ path: `sources.${t.source}.kind`, message: (e as Error).message });
      return;
    }
    const name =
      t.target && t.target !== t.table.toLowerCase() ? `${t.table} (lake table ${t.target})` : t.table;
    const path = `tables[${i}].mode`;
    if (t.mode === 'cdc') {
      const missing = cdcMissing(reg);
      if (missing.length > 0) {
        problems.push({
          path,
          message: `${name} is mode: cdc, but the ${source.kind} driver (sources.${t.source}) cannot stream changes in this release (capabilities: ${missing.join(', ')}); set mode: incremental with a cursor column (cursor: updated_at, say) for this table`,
        });
      }
      return;
    }
    if (!reg.capabilities.modes.includes('incremental') || !reg.openIncremental) {
      const alternative =
        cdcMissing(reg).length === 0
          ? 'set mode: cdc for this table'
          : 'read it from a postgres or mysql source';
      problems.push({
        path,
        message: `${name} is mode: incremental, but the ${source.kind} driver (sources.${t.source}) has no incremental read (modes: ${reg.capabilities.modes.join(', ') || 'none'}); ${alternative}`,
      });
    }
  });
  return problems;
}

/** `checkModes` as a ConfigError listing every refused table (none: returns). */
export function assertModes(spec: ModeGateSpec): void {
  const [first, ...more] = checkModes(spec);
  if (first) throw new ConfigError(first.path, first.message, { more });
}
