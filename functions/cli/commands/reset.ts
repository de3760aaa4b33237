/**
 * `tidemark reset`: forgets a table's cursor; with a state that does not cover the lake, does
 * what the operator says to this writer's objects (shared/engine/incremental/reset.ts). It is
 * also the way out of a mode change (shared/pipeline/reset-table.ts): it retires the incremental
 * state of a table the spec now says is `mode: cdc`, and takes a table the spec now says is
 * `mode: incremental` out of its source's CDC state (with --delete-objects). A table still
 * `mode: cdc` is refused until on-demand re-snapshots exist; the refusal says what a reset would replace.
 */
import { parseArgs } from 'node:util';
import { findTable, tableTarget } from '../../../shared/config/spec.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { resetTable } from '../../../shared/pipeline/reset-table.js';
import { writerId } from '../../../shared/sink/layout.js';
import { isProvablyDead, localOwner } from '../../../shared/state/lease-owner.js';
import { specArg, UsageError } from '../args.js';

export async function cmdReset(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      'keep-objects': { type: 'boolean' },
      'delete-objects': { type: 'boolean' },
    },
  });
  const spec = specArg(values);
  if (!values.table) throw new UsageError('missing --table T');
  if (values['keep-objects'] && values['delete-objects'])
    throw new UsageError('give at most one of --keep-objects and --delete-objects');
  const t = findTable(spec, values.table);
  const target = tableTarget(t);
  const writer = writerId(spec.pipeline, t.source);
  const pipeline = await openPipeline(spec, { sourcesLazy: true });
  try {
    const r = await resetTable(spec, t, {
      store: pipeline.store,
      sink: pipeline.sink,
      owner: localOwner(),
      isHolderDead: isProvablyDead,
      ...(values['keep-objects'] ? { objects: 'keep' as const } : {}),
      ...(values['delete-objects'] ? { objects: 'delete' as const } : {}),
    });
    const mb = (refs: readonly { bytes: number }[]) =>
      (refs.reduce((n, o) => n + o.bytes, 0) / 1e6).toFixed(1);
    const where = `${spec.lake.uri.replace(/\/+$/, '')}/${target}/`;
    if (r.kind === 'retired') {
      console.log(
        `${target}: incremental state retired (the spec says mode: cdc); ${r.deleted.length > 0 || values['delete-objects'] ? `deleted ${r.deleted.length} object(s) (${mb(r.deleted)} MB) of writer ${writer}` : `keeps ${r.kept.length} object(s) (${mb(r.kept)} MB) of writer ${writer} under ${where}; CDC rows sort after them`}`,
      );
    } else if (r.kind === 'left-cdc') {
      console.log(
        `${target}: taken out of the CDC state of sources.${t.source}; deleted ${r.deleted.length} object(s) (${mb(r.deleted)} MB) of writer ${writer} under ${where}; the next run syncs it incrementally from the start`,
      );
    } else if (r.deleted.length > 0 || values['delete-objects']) {
      console.log(
        `${target}: deleted ${r.deleted.length} object(s) (${mb(r.deleted)} MB) of writer ${writer} under ${where}; other writers' objects were not touched; the next run resyncs from the start`,
      );
    } else if (values['keep-objects']) {
      console.log(
        `${target}: cursor reset; keeps ${r.kept.length} object(s) (${mb(r.kept)} MB) of writer ${writer} under ${where}; the next run re-reads the table from the start and writes after them (from page ${r.nextSeq}); readers pick the newest version of each row by __pos, and rows deleted at the source keep their last version`,
      );
    } else {
      console.log(
        `${target}: cursor reset; the next run resyncs from the start (positions continue at page ${r.nextSeq}; the ${r.kept.length} existing object(s) stay)`,
      );
    }
  } finally {
    await pipeline.close();
  }
}
