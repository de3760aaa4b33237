/**
 * `tidemark convert`: converts, once, the spec's upsert Iceberg tables that the release before
 * current-state tables wrote as change logs (shared/pipeline/convert-tables.ts; docs/iceberg.md
 * "Converting a change-log upsert table"). Prints per table the rows scanned, the rows deleted by
 * position, the delete files and the snapshot, or that it already is current-state; with `--json`
 * exactly one JSON object per table on stdout (an error too), progress and logs never there.
 */
import { parseArgs } from 'node:util';
import type { ConvertProgress } from '../../../shared/iceberg/convert-current-state.js';
import { createLogger } from '../../../shared/observability/log.js';
import { Progress } from '../../../shared/observability/progress.js';
import { type ConvertTableOutcome, convertTables } from '../../../shared/pipeline/convert-tables.js';
import { errorObject, specArg } from '../args.js';

export async function cmdConvert(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      json: { type: 'boolean' },
    },
  });
  const json = values.json ?? false;
  const tty = !json && Boolean(process.stderr.isTTY);
  let progress: { target: string; bar: Progress; rows: number; bytes: number } | undefined;
  const finishProgress = () => {
    progress?.bar.done();
    progress = undefined;
  };
  try {
    const spec = specArg(values);
    const outcomes = await convertTables(spec, {
      ...(values.table ? { table: values.table } : {}),
      ...(tty
        ? {
            onProgress: (target: string, p: ConvertProgress) => {
              if (progress?.target !== target) {
                finishProgress();
                const bar = new Progress({
                  label: `convert ${target}`,
                  logger: createLogger({ json: false }),
                  tty,
                });
                progress = { target, bar, rows: 0, bytes: 0 };
              }
              const now = progress!;
              now.bar.add(p.rowsScanned - now.rows, p.bytesRead - now.bytes);
              now.rows = p.rowsScanned;
              now.bytes = p.bytesRead;
            },
          }
        : {}),
    });
    finishProgress();
    for (const o of outcomes)
      process.stdout.write(json ? `${JSON.stringify(jsonOf(o))}\n` : `${textOf(o)}\n`);
  } catch (e) {
    finishProgress();
    // The error object on stdout keeps `--json` output parseable; main prints the line on stderr.
    if (json) process.stdout.write(`${JSON.stringify({ status: 'error', error: errorObject(e) })}\n`);
    throw e;
  }
}

function jsonOf(o: ConvertTableOutcome): Record<string, unknown> {
  if (o.status !== 'converted') return { table: o.target, ident: o.ident, status: o.status };
  return {
    table: o.target,
    ident: o.ident,
    status: o.status,
    rowsScanned: o.rowsScanned,
    rowsDeleted: o.rowsDeleted,
    rowsKept: o.rowsKept,
    deleteFiles: o.deleteFiles,
    snapshotId: o.snapshotId === undefined ? null : String(o.snapshotId),
  };
}

function textOf(o: ConvertTableOutcome): string {
  switch (o.status) {
    case 'no-table':
      return `${o.target}: no Iceberg table ${o.ident} in the catalog yet: nothing to convert (its first write creates it current-state)`;
    case 'already-current-state':
      return `${o.target}: already current-state; left alone`;
    case 'converted':
      return o.snapshotId === undefined
        ? `${o.target}: converted: ${o.rowsScanned} rows scanned, none to delete; marked current-state (no new snapshot)`
        : `${o.target}: converted: ${o.rowsScanned} rows scanned, ${o.rowsDeleted} deleted by position in ${o.deleteFiles} delete file(s), ${o.rowsKept} current rows; snapshot ${o.snapshotId}`;
  }
}
