/**
 * `tidemark schema accept`: records a table's current schema as the one it writes, after a
 * schema change the rules stopped on (shared/engine/incremental/schema.ts for an incremental
 * table, shared/engine/cdc/schema.ts for a cdc table; docs/schema-changes.md). Prints what
 * changed and the new schema version.
 */
import { parseArgs } from 'node:util';
import { resolveSourceUrl } from '../../../shared/config/secrets.js';
import {
  type CdcTableSpec,
  findTable,
  isIncremental,
  type Spec,
  tableTarget,
} from '../../../shared/config/spec.js';
import { TidemarkError } from '../../../shared/contracts/errors.js';
import { describeChange } from '../../../shared/dataplane/schema-rules.js';
import { driver } from '../../../shared/drivers/registry.js';
import { acceptCdcSchema } from '../../../shared/engine/cdc/schema.js';
import { cdcStateKey } from '../../../shared/engine/cdc/state.js';
import { acceptSchema } from '../../../shared/engine/incremental/schema.js';
import { incrementalStateKey } from '../../../shared/engine/incremental/state.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { isProvablyDead, localOwner } from '../../../shared/state/lease-owner.js';
import { specArg, UsageError } from '../args.js';

export async function cmdSchema(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
    },
  });
  const sub = positionals.join(' ');
  if (sub !== 'accept') throw new UsageError(`unknown schema command "${sub}"; use: schema accept --table T`);
  const spec = specArg(values);
  if (!values.table) throw new UsageError('missing --table T');
  const found = findTable(spec, values.table);
  if (!isIncremental(found)) return acceptCdc(spec, found);
  const t = found;
  const target = tableTarget(t);
  const pipeline = await openPipeline(spec);
  try {
    const source = await pipeline.source(t.source, t);
    const r = await acceptSchema({
      key: incrementalStateKey(spec.pipeline, target),
      target,
      table: { source: t.table, target, exclude: t.exclude, cursorColumn: t.cursor },
      cursorColumn: t.cursor,
      onWiden: t.onWiden,
      source,
      store: pipeline.store,
      owner: localOwner(),
      isHolderDead: isProvablyDead,
    });
    if (r.before && r.after === r.before) {
      console.log(`${target}: the schema has not changed (version ${r.before.version}); nothing to accept`);
      return;
    }
    const lines = r.changes.map((c) => `  - ${describeChange(c)}`);
    console.log(
      `${target}: recorded schema version ${r.after.version}${r.before ? ` (was ${r.before.version})` : ''}; the next run continues from its cursor and writes new objects with it${lines.length > 0 ? `:\n${lines.join('\n')}` : ''}`,
    );
  } finally {
    await pipeline.close();
  }
}

/** `schema accept` of a cdc table: its entry in the source's CDC state takes the current schema. */
async function acceptCdc(spec: Spec, t: CdcTableSpec): Promise<void> {
  const target = tableTarget(t);
  const key = cdcStateKey(spec.pipeline, t.source);
  const s = spec.sources[t.source]!;
  const reg = driver(s.kind);
  // The spec gate (shared/config/modes.ts) refuses this already; a hand-built spec may not.
  if (!reg.openCdc)
    throw new TidemarkError(
      'SOURCE_NOT_CDC',
      `sources.${t.source}: the ${s.kind} driver has no change-stream reader`,
    );
  const pipeline = await openPipeline(spec, { sourcesLazy: true });
  // Introspection only: nothing is created at the source (no slot, publication or binlog dump).
  const source = await reg.openCdc({
    url: await resolveSourceUrl(s, { name: t.source }),
    sourceName: `sources.${t.source}`,
    connectTimeoutMs: s.connectTimeoutSeconds * 1000,
    heartbeatMs: 10_000,
  });
  try {
    const r = await acceptCdcSchema({
      key,
      sourceName: t.source,
      target,
      table: { source: t.table, target, exclude: t.exclude },
      source,
      store: pipeline.store,
      owner: localOwner(),
      isHolderDead: isProvablyDead,
    });
    if (!r.changed) {
      console.log(
        `${target}: the schema has not changed (version ${r.after.version}, hash ${r.after.hash}); nothing to accept`,
      );
      return;
    }
    console.log(
      `${target}: recorded schema version ${r.after.version}${r.before.version !== undefined ? ` (was ${r.before.version})` : ''} in ${key}${r.stop ? `, accepting: ${r.stop.detail}` : ''}; the next tidemark cdc resumes the capture from the source's position and writes new objects with it (objects already in the lake keep their schema)`,
    );
  } finally {
    await source.close();
    await pipeline.close();
  }
}
