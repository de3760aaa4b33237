/**
 * `tidemark schema accept`: records a table's current schema as the one it writes, after a
 * schema change the rules stopped on (shared/engine/incremental/schema.ts,
 * docs/schema-changes.md). Prints what changed and the new schema version.
 */
import { parseArgs } from 'node:util';
import { findIncrementalTable, tableTarget } from '../../../shared/config/spec.js';
import { describeChange } from '../../../shared/dataplane/schema-rules.js';
import { incrementalStateKey } from '../../../shared/engine/incremental/run.js';
import { acceptSchema } from '../../../shared/engine/incremental/schema.js';
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
  const t = findIncrementalTable(spec, values.table, 'tidemark schema accept');
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
