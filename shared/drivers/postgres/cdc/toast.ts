/**
 * Unchanged TOAST values read back by key (`unchangedToast: reread`, the default; docs/postgres-cdc.md
 * "Unchanged TOAST values"). An UPDATE that does not change a large out-of-line value logs none
 * for it: pgoutput marks it unchanged ('u'), which is not NULL. When the old tuple cannot supply
 * it (no REPLICA IDENTITY FULL), the row is deferred and the value read from the table by
 * primary key, in one query per table at the flush (the reader's `settle`).
 *
 * Owns: filling unchanged values from the old tuple (REPLICA IDENTITY FULL: exact, no deferral),
 * the deferred rows' form (the values as text, UNCHANGED where the log carried none, with the
 * row's metadata), deferring a row, and the read-back query. Once a table has a deferred row
 * every later row of it is deferred too, so its rows reach the encoder in log order.
 * Must never turn an unchanged value into NULL unless the row is gone (its delete, later in
 * `__pos`, then wins), nor read back a table whose key is not captured.
 */
import { SourceError } from '../../../contracts/errors.js';
import type { OpCode } from '../../../dataplane/metadata.js';
import type { Schema } from '../../../dataplane/schema.js';
import type { PostgresConnection } from '../connect.js';
import type { ColumnInfo } from '../introspect.js';
import { quoteIdent } from '../types.js';
import { COL_BINARY, COL_NULL, COL_TEXT, COL_UNCHANGED, type Tuple } from '../wire/pgoutput.js';

/** A decoded value of a deferred row: text, null, or unchanged (to be read back). */
export const UNCHANGED = Symbol('unchanged');
export type Deferred = {
  readonly op: OpCode;
  readonly prefix: string;
  readonly ordinal: number;
  readonly commitNs: bigint;
  readonly values: (string | null | typeof UNCHANGED)[];
};

/** What filling unchanged values needs of a table. */
interface UnchangedTable {
  readonly target: string;
  readonly source: string;
  readonly unchangedToast: 'reread' | 'fail';
  readonly schemaToRel: Int32Array;
}

/** A table's deferred rows, as the reader's table state holds them. */
interface DeferringTable {
  readonly schemaToRel: Int32Array;
  deferred: Deferred[] | undefined;
  deferredBytes: number;
}

/** What the read-back query needs of a table. */
interface RereadTable {
  readonly target: string;
  readonly source: string;
  readonly schema: Schema;
  readonly infos: readonly ColumnInfo[];
}

/**
 * Fills each unchanged value ('u') of row `tup` of `t` from `old` where the old tuple carries it
 * (REPLICA IDENTITY FULL), counting into `seen`; true when one stays unchanged, so the row must
 * be deferred (or, under `unchangedToast: fail`, is refused here). Once per row: allocates
 * nothing.
 */
export function fillUnchanged(
  t: UnchangedTable,
  tup: Tuple,
  old: Tuple | undefined,
  seen: { unchangedToast: number; filledFromOld: number },
): boolean {
  const s2r = t.schemaToRel;
  const ncols = s2r.length;
  let unchanged = false;
  for (let j = 0; j < ncols; j++) {
    const r = s2r[j]!;
    if (r < tup.count && tup.kind[r] === COL_UNCHANGED) {
      seen.unchangedToast++;
      if (old && r < old.count && (old.kind[r] === COL_TEXT || old.kind[r] === COL_BINARY)) {
        seen.filledFromOld++;
        tup.kind[r] = old.kind[r]!;
        tup.start[r] = old.start[r]!;
        tup.end[r] = old.end[r]!;
      } else unchanged = true;
    }
  }
  if (unchanged && t.unchangedToast === 'fail')
    throw new SourceError(
      'CDC_UNCHANGED_TOAST',
      `${t.target}: an UPDATE left a TOASTed column unchanged, so the log did not carry its value, and the table says unchangedToast: fail; run ALTER TABLE ${t.source} REPLICA IDENTITY FULL (exact, more WAL), or set unchangedToast: reread`,
    );
  return unchanged;
}

/** Defers row `tup` (its values in `buf`) of `t`, at `__pos` prefix + ordinal. */
export function defer(
  t: DeferringTable,
  op: OpCode,
  tup: Tuple,
  buf: Buffer,
  prefix: string,
  ordinal: number,
  commitNs: bigint,
): void {
  const values: Deferred['values'] = [];
  let bytes = 0;
  for (let j = 0; j < t.schemaToRel.length; j++) {
    const r = t.schemaToRel[j]!;
    const k = r < tup.count ? tup.kind[r]! : COL_NULL;
    if (k === COL_TEXT) {
      const s = buf.toString('utf8', tup.start[r]!, tup.end[r]!);
      bytes += tup.end[r]! - tup.start[r]! + 8;
      values.push(s);
    } else if (k === COL_UNCHANGED) values.push(UNCHANGED);
    else values.push(null);
  }
  if (!t.deferred) t.deferred = [];
  t.deferred.push({ op, prefix, ordinal, commitNs, values });
  t.deferredBytes += bytes;
}

/**
 * Replaces every UNCHANGED value of `rows` (deferred rows of `t`) with its column's current
 * text, null when the row is gone; returns how many rows were read back.
 */
export async function readBack(
  db: PostgresConnection,
  t: RereadTable,
  rows: readonly Deferred[],
): Promise<number> {
  const need = new Set<number>();
  for (const d of rows) for (let j = 0; j < d.values.length; j++) if (d.values[j] === UNCHANGED) need.add(j);
  const keyIdx = t.schema.primaryKey.map((k) => t.schema.columns.findIndex((c) => c.name === k));
  const lookups = rows.filter((d) => d.values.includes(UNCHANGED));
  const found =
    need.size > 0 && lookups.length > 0 ? await reread(db, t, keyIdx, [...need], lookups) : new Map();
  for (const d of lookups) {
    const key = JSON.stringify(keyIdx.map((j) => d.values[j]));
    const current = found.get(key);
    for (let j = 0; j < d.values.length; j++)
      if (d.values[j] === UNCHANGED) d.values[j] = current?.get(j) ?? null;
  }
  return lookups.length;
}

/** The current text of columns `cols` of the rows keyed as in `rows`; a row gone is absent. */
async function reread(
  db: PostgresConnection,
  t: RereadTable,
  keyIdx: number[],
  cols: number[],
  rows: Deferred[],
): Promise<Map<string, Map<number, string | null>>> {
  if (keyIdx.some((j) => j < 0))
    throw new SourceError(
      'CDC_UNCHANGED_TOAST',
      `${t.target}: an unchanged TOASTed value must be read back by key, but the table's key is not captured; set REPLICA IDENTITY FULL on ${t.source}`,
    );
  const keys = rows.map((d) => keyIdx.map((j) => d.values[j] as string));
  const plan = t.infos;
  const { schema: nsp, table: rel } = splitQualified(t.source);
  const on = keyIdx
    .map((j, i) => `t.${quoteIdent(t.schema.columns[j]!.name)} = (k.v->>${i})::${plan[j]!.castType}`)
    .join(' AND ');
  const select = cols.map((j, i) => `t.${quoteIdent(t.schema.columns[j]!.name)}::text AS c${i}`).join(', ');
  const result = await db.run((sql) =>
    sql.unsafe<Record<string, string | null>[]>(
      `SELECT k.v::text AS key, ${select}
         FROM jsonb_array_elements($1::text::jsonb) AS k(v)
         JOIN ${quoteIdent(nsp)}.${quoteIdent(rel)} t ON ${on}`,
      [JSON.stringify(keys)],
    ),
  );
  const out = new Map<string, Map<number, string | null>>();
  for (const row of result) {
    const key = JSON.stringify(JSON.parse(row.key as string));
    const values = new Map<number, string | null>();
    for (let i = 0; i < cols.length; i++) values.set(cols[i]!, row[`c${i}`] ?? null);
    out.set(key, values);
  }
  return out;
}

function splitQualified(source: string): { schema: string; table: string } {
  const dot = source.indexOf('.');
  return { schema: source.slice(0, dot), table: source.slice(dot + 1) };
}
