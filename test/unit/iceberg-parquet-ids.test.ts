/**
 * The field ids of a table's Iceberg schema reach its Parquet files (issue 30, item 5): a table
 * of every logical kind, lists and a list of lists included, cast with `toLakeRecordWithIds` and
 * written by parquet-wasm (lists) and by tidemark's flat writer (the flat kinds), read back by
 * readers tidemark did not write. DuckDB's `parquet_schema()` and pyarrow see each column's and
 * each list element's id, and each kind's Parquet type is one Iceberg reads as the kind's Iceberg
 * type; pyiceberg takes the files into an Iceberg table of that schema (checking each file's
 * schema against the table's by id), with two columns renamed on the table's side only, and reads
 * every value back under the new names: the reader matched the columns by id, not by name.
 * The pyiceberg part needs .venv-readers (scripts/install-test-readers.sh) and says so when
 * skipped.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { type Schema as ArrowSchema, type Field, Table, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchError } from '../../shared/dataplane/batch.js';
import {
  lakeSchema,
  PARQUET_FIELD_ID,
  toLakeRecord,
  toLakeRecordWithIds,
} from '../../shared/dataplane/lake.js';
import type { Column, LogicalType, Schema } from '../../shared/dataplane/schema.js';
import { UNPARTITIONED } from '../../shared/iceberg/partition.js';
import { icebergSchemaOf, lakeFieldIdsOf } from '../../shared/iceberg/schema.js';
import type { IcebergSchema, IcebergTableMetadata, IcebergType } from '../../shared/iceberg/spec.js';
import { nativeCompressor } from '../../shared/sink/parquet-pages.cjs';
import { encodeFlat, encodeParquet } from '../../shared/sink/parquet-writer.js';
import { duckQuery } from '../harness/duckdb.js';
import { type TestRow, wireRecord } from '../harness/lake-record.js';
import { arbitraryOf, KINDS } from '../harness/logical-arbitraries.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';

/** Every kind the harness knows, plus MySQL's BIGINT UNSIGNED and a mid-size decimal. */
const TYPES: LogicalType[] = [
  ...KINDS,
  { kind: 'decimal', precision: 20, scale: 0 },
  { kind: 'decimal', precision: 9, scale: 3 },
];
const COLUMNS: Column[] = [
  { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
  ...TYPES.map((type, i) => ({ name: `c${i}`, type, nullable: i % 3 !== 0, sourceType: type.kind })),
];
const SCHEMA: Schema = { columns: COLUMNS, primaryKey: ['id'] };
const FLAT: Schema = { columns: COLUMNS.filter((c) => c.type.kind !== 'list'), primaryKey: ['id'] };
const INGEST_NANOS = 1_700_000_000_123_456_789n;
const wire = (schema: Schema, rows: readonly TestRow[]) =>
  wireRecord(schema, rows, { ingestTsNanos: INGEST_NANOS });

/** Values in what every reader here reads: instants and dates within years 1..9999. */
function valueArb(t: LogicalType): fc.Arbitrary<unknown> {
  if (t.kind === 'timestamp')
    return fc.bigInt({ min: -62_135_596_800_000_000n, max: 253_402_300_799_999_999n });
  if (t.kind === 'date') return fc.integer({ min: -719_162, max: 2_932_896 });
  if (t.kind === 'list')
    return fc.array(fc.option(valueArb(t.element), { nil: null, freq: 4 }), { maxLength: 4 });
  return arbitraryOf(t);
}

function rowsOf(schema: Schema, n: number, seed: number): Record<string, unknown>[] {
  const others = schema.columns.slice(1);
  const values = fc.sample(
    fc.tuple(
      ...others.map((c) => (c.nullable ? fc.option(valueArb(c.type), { nil: null }) : valueArb(c.type))),
    ),
    { numRuns: n, seed },
  );
  const rows = values.map((v, r) => ({
    id: BigInt(r),
    ...Object.fromEntries(others.map((c, i) => [c.name, v[i]])),
  }));
  // And a row of NULLs wherever a column may hold one.
  rows.push({
    id: BigInt(n),
    ...Object.fromEntries(others.map((c, i) => [c.name, c.nullable ? null : values[0]![i]])),
  });
  return rows;
}

/** (name, id) of every field and list element that has an id, depth first, as Parquet lists them. */
function expectedIds(schema: IcebergSchema): [string, number][] {
  const out: [string, number][] = [];
  const visit = (t: IcebergType) => {
    if (typeof t === 'object' && t.type === 'list') {
      out.push(['element', t['element-id']]);
      visit(t.element);
    }
  };
  for (const f of schema.fields) {
    out.push([f.name, f.id]);
    visit(f.type);
  }
  return out;
}

/**
 * The elements of pyarrow's Parquet schema that carry an id (-1: none), after checking that only
 * the root and the lists' repeated groups carry none.
 */
function withIds(elements: [string, number][]): [string, number][] {
  const none = elements.filter(([, id]) => id === -1).map(([name]) => name);
  expect(none[0], 'the root has no id').toBeDefined();
  expect(none.slice(1).every((name) => name === 'list')).toBe(true);
  return elements.filter(([, id]) => id !== -1);
}

/** The field ids an Arrow schema carries, depth first. */
function arrowIds(schema: ArrowSchema): [string, number][] {
  const out: [string, number][] = [];
  const visit = (f: Field) => {
    out.push([f.name, Number(f.metadata.get(PARQUET_FIELD_ID))]);
    for (const child of f.type.children ?? []) visit(child);
  };
  for (const f of schema.fields) visit(f);
  return out;
}

let dir: string;
let duck: Awaited<ReturnType<typeof DuckDBInstance.create>>;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'iceberg-ids-'));
  duck = await DuckDBInstance.create(':memory:');
});
afterAll(() => {
  duck?.closeSync();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const query = async (sql: string): Promise<Record<string, unknown>[]> =>
  (await duckQuery(duck, sql)).getRowObjectsJson();
const lit = (s: string) => `'${s.replaceAll("'", "''")}'`;

const iceberg = icebergSchemaOf(SCHEMA);
const ids = lakeFieldIdsOf(iceberg.schema);
const flatIceberg = icebergSchemaOf(FLAT);
const rows = rowsOf(SCHEMA, 30, 30);
const flatRows = rowsOf(FLAT, 30, 31);
const record = toLakeRecordWithIds(wire(SCHEMA, rows), ids);
const flatRecord = toLakeRecordWithIds(wire(FLAT, flatRows), lakeFieldIdsOf(flatIceberg.schema));

/** The table's Parquet files: every kind through parquet-wasm, the flat kinds through the flat writer. */
function files(): { wasm: string; flat: string } {
  const wasm = join(dir, 'all-kinds.parquet');
  const flat = join(dir, 'flat.parquet');
  if (!existsSync(wasm)) {
    writeFileSync(wasm, encodeParquet([record]));
    const bytes = encodeFlat([flatRecord], {}, nativeCompressor('gzip')!);
    expect(bytes, 'the flat writer took the flat schema').toBeInstanceOf(Uint8Array);
    writeFileSync(flat, bytes!);
  }
  return { wasm, flat };
}

describe('field ids on the lake schema', () => {
  it('puts each id on its field, list elements included, and leaves a schema without ids as it was', () => {
    const lake = lakeSchema(SCHEMA, ids);
    expect(arrowIds(lake)).toEqual(expectedIds(iceberg.schema));
    const plain = lakeSchema(SCHEMA);
    const noMetadata = (f: Field): boolean =>
      f.metadata.size === 0 && (f.type.children ?? []).every((c: Field) => noMetadata(c));
    expect(plain.fields.every(noMetadata)).toBe(true);
  });

  it('gives a cast record the very IPC schema lakeSchema gives (the encoder template key), sharing the buffers', () => {
    const plain = wire(SCHEMA, rows.slice(0, 3));
    const lake = toLakeRecordWithIds(plain, ids);
    const ipc = (s: ArrowSchema) => Buffer.from(tableToIPC(new Table(s), 'stream'));
    expect(ipc(lake.schema).equals(ipc(lakeSchema(SCHEMA, ids)))).toBe(true);
    const tags = SCHEMA.columns.findIndex((c) => c.type.kind === 'list');
    expect(lake.data.children[tags]!.valueOffsets).toBe(plain.data.children[tags]!.valueOffsets);
    expect(lake.data.children[0]).toBe(plain.data.children[0]);
    // And without ids, exactly what it was.
    expect(ipc(toLakeRecord(plain).schema).equals(ipc(lakeSchema(SCHEMA)))).toBe(true);
  });

  it('refuses ids built from another schema', () => {
    const other = lakeFieldIdsOf(icebergSchemaOf({ columns: COLUMNS.slice(0, 3), primaryKey: [] }).schema);
    expect(() => toLakeRecordWithIds(wire(SCHEMA, rows.slice(0, 1)), other)).toThrow(BatchError);
    expect(() => toLakeRecordWithIds(wire(SCHEMA, rows.slice(0, 1)), other)).toThrow(/has no field id/);
  });
});

describe('field ids in the Parquet files', () => {
  it("reach both writers' files, list elements included, as DuckDB's parquet_schema() reads them", async () => {
    const { wasm, flat } = files();
    for (const [path, schema] of [
      [wasm, iceberg.schema],
      [flat, flatIceberg.schema],
    ] as const) {
      const elements = await query(
        `SELECT name, field_id FROM parquet_schema(${lit(path)}) WHERE field_id IS NOT NULL`,
      );
      expect(elements.map((e) => [e.name, Number(e.field_id)])).toEqual(expectedIds(schema));
      // Only the root and each list's repeated group have none.
      const without = await query(`SELECT name FROM parquet_schema(${lit(path)}) WHERE field_id IS NULL`);
      expect(new Set(without.slice(1).map((e) => e.name))).toEqual(
        new Set(schema === iceberg.schema ? ['list'] : []),
      );
    }
  });

  it("hold each kind in a Parquet type Iceberg reads as the kind's Iceberg type", async () => {
    const { wasm } = files();
    const elements = await query(
      `SELECT name, type, type_length, converted_type, logical_type FROM parquet_schema(${lit(wasm)}) WHERE field_id IS NOT NULL`,
    );
    const byId = new Map(expectedIds(iceberg.schema).map(([, id], i) => [id, elements[i]!]));
    /** The fewest bytes a FIXED decimal of precision p takes (Iceberg's rule for the fixed form). */
    const minBytes = (p: number) => {
      let b = 1;
      while (10n ** BigInt(p) - 1n >= 2n ** BigInt(8 * b - 1)) b++;
      return b;
    };
    const check = (id: number, t: IcebergType) => {
      const e = byId.get(id)!;
      const at = `${e.name} (${JSON.stringify(t)}): ${JSON.stringify(e)}`;
      if (typeof t === 'object') {
        if (t.type !== 'list') throw new Error(at);
        check(t['element-id'], t.element);
        return;
      }
      const decimal = /^decimal\((\d+), (\d+)\)$/.exec(t);
      if (decimal) {
        const p = Number(decimal[1]);
        // arrow-rs: INT32 for 2 <= p <= 9, INT64 up to 18 (precision 1 included), else the
        // shortest FIXED; Parquet allows INT32 and INT64 for any precision they hold.
        const physical = p >= 2 && p <= 9 ? 'INT32' : p <= 18 ? 'INT64' : 'FIXED_LEN_BYTE_ARRAY';
        expect(e.type, at).toBe(physical);
        if (physical === 'FIXED_LEN_BYTE_ARRAY') expect(Number(e.type_length), at).toBe(minBytes(p));
        expect(String(e.logical_type), at).toContain(`scale=${decimal[2]}, precision=${p}`);
        return;
      }
      const physical: Record<string, string> = {
        boolean: 'BOOLEAN',
        int: 'INT32',
        long: 'INT64',
        double: 'DOUBLE',
        string: 'BYTE_ARRAY',
        binary: 'BYTE_ARRAY',
        date: 'INT32',
        timestamp: 'INT64',
        timestamptz: 'INT64',
      };
      expect(e.type, at).toBe(physical[t]);
      const logical = String(e.logical_type);
      if (t === 'string') expect(logical, at).toMatch(/StringType/);
      if (t === 'binary') expect(logical, at).not.toMatch(/StringType/);
      if (t === 'date') expect(logical, at).toMatch(/DateType/);
      if (t === 'timestamp' || t === 'timestamptz') {
        expect(logical, at).toMatch(/MICROS=MicroSeconds\(\)/);
        expect(logical, at).toContain(`isAdjustedToUTC=${t === 'timestamptz' ? 1 : 0}`);
      }
      // int8 / int16 carry INT(8) / INT(16) (INT_8 / INT_16): INT32 values Iceberg reads as int.
      if (t === 'int') expect([null, 'INT_8', 'INT_16', 'INT_32'], at).toContain(e.converted_type);
    };
    for (const f of iceberg.schema.fields) check(f.id, f.type);
  });

  const pyTitle =
    readersMissing === undefined
      ? 'pyarrow reads the ids from the Parquet schema, and pyiceberg reads every value through the Iceberg schema, by id'
      : `pyarrow and pyiceberg read the ids (SKIPPED: ${readersMissing})`;
  it.skipIf(readersMissing !== undefined)(
    pyTitle,
    async () => {
      const { wasm, flat } = files();
      // pyiceberg renames two columns after adding the file (ids kept, as an Iceberg rename
      // does): the file still says c1 and the first list's name, so only a read by id finds
      // their values under the new names.
      const listColumn = SCHEMA.columns.find((c) => c.type.kind === 'list')!.name;
      const renames = new Map([
        ['c1', 'renamed_scalar'],
        [listColumn, 'renamed_list'],
      ]);
      const renamed: IcebergSchema = {
        ...iceberg.schema,
        'schema-id': iceberg.schema['schema-id'] + 1,
        fields: iceberg.schema.fields.map((f) => ({ ...f, name: renames.get(f.name) ?? f.name })),
      };
      const metadataFile = join(dir, 'v1.metadata.json');
      const metadata: IcebergTableMetadata = {
        'format-version': 2,
        'table-uuid': '4e8a3c1e-8d7b-4c64-9a51-0f3c2b1d5e77',
        location: `file://${join(dir, 'table')}`,
        'last-sequence-number': 0,
        'last-updated-ms': 1_700_000_000_000,
        'last-column-id': iceberg.lastColumnId,
        schemas: [iceberg.schema],
        'current-schema-id': iceberg.schema['schema-id'],
        'partition-specs': [UNPARTITIONED.spec],
        'default-spec-id': 0,
        'last-partition-id': UNPARTITIONED.lastPartitionId,
        properties: {},
        snapshots: [],
        'snapshot-log': [],
        'metadata-log': [],
        'sort-orders': [{ 'order-id': 0, fields: [] }],
        'default-sort-order-id': 0,
      };
      writeFileSync(metadataFile, JSON.stringify(metadata));
      const out = await runReaderScript<{
        parquet_ids: [string, number][][];
        stats_errors: string[];
        schema: { id: number; name: string; type: string; required: boolean }[];
        rows: Record<string, unknown>[];
      }>('read_data_file.py', [
        '--dir',
        join(dir, 'py'),
        '--metadata',
        metadataFile,
        '--parquet',
        wasm,
        ...[...renames].flatMap(([from, to]) => ['--rename', `${from}=${to}`]),
      ]);
      expect(withIds(out.parquet_ids[0]!)).toEqual(expectedIds(iceberg.schema));
      // The one place the lake's Parquet is not what Iceberg's spec asks a writer for: arrow-rs
      // writes decimal(1, s) as INT64 where the spec says INT32 (p <= 9). Parquet allows it and
      // readers read it (the rows below), but pyiceberg's add_files refuses to take statistics
      // from it. Should arrow-rs change, this says so (and docs/types.md loses the note).
      expect(out.stats_errors).toEqual([
        "all-kinds.parquet: Unexpected physical type INT64 for decimal(1, 0), expected INT32 for column 'c10'",
      ]);
      // pyiceberg kept the table's ids and types.
      expect(out.schema.map((f) => [f.id, f.name, f.required])).toEqual(
        renamed.fields.map((f) => [f.id, f.name, f.required]),
      );
      const got = [...out.rows].sort((a, b) => Number(a.id) - Number(b.id));
      const expected = rows.map((r, i) => expectedRow(SCHEMA, r, renames, record.getChild('__pos')!.get(i)));
      expect(got).toEqual(expected);

      // The flat writer's file, in a table of its own schema.
      const flatDir = join(dir, 'flat');
      const flatMetadataFile = join(dir, 'flat.metadata.json');
      writeFileSync(
        flatMetadataFile,
        JSON.stringify({
          ...metadata,
          'last-column-id': flatIceberg.lastColumnId,
          schemas: [flatIceberg.schema],
          location: `file://${join(dir, 'flat-table')}`,
        }),
      );
      const flatOut = await runReaderScript<typeof out>('read_data_file.py', [
        '--dir',
        flatDir,
        '--metadata',
        flatMetadataFile,
        '--parquet',
        flat,
      ]);
      expect(withIds(flatOut.parquet_ids[0]!)).toEqual(expectedIds(flatIceberg.schema));
      expect(flatOut.stats_errors).toEqual([
        "flat.parquet: Unexpected physical type INT64 for decimal(1, 0), expected INT32 for column 'c10'",
      ]);
      const flatGot = [...flatOut.rows].sort((a, b) => Number(a.id) - Number(b.id));
      expect(flatGot).toEqual(
        flatRows.map((r, i) => expectedRow(FLAT, r, new Map(), flatRecord.getChild('__pos')!.get(i))),
      );
    },
    120_000,
  );
});

// ---- the values pyiceberg prints (test/readers/common.py), from the rows written

const EXACT = 2n ** 53n;

function expectedRow(
  schema: Schema,
  row: Record<string, unknown>,
  renames: ReadonlyMap<string, string>,
  pos: string,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const c of schema.columns) out[renames.get(c.name) ?? c.name] = expectedValue(c.type, row[c.name]);
  const micros = INGEST_NANOS / 1000n;
  return {
    ...out,
    __op: 'u',
    __pos: pos,
    __commit_ts: null,
    __ingest_ts: `${isoMicros(micros)}+00:00`,
    __snapshot: false,
    __phase: 'incremental',
  };
}

function expectedValue(t: LogicalType, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  switch (t.kind) {
    case 'int64': {
      const b = BigInt(v as bigint);
      return b >= -EXACT && b <= EXACT ? Number(b) : b.toString();
    }
    case 'float64': {
      const x = v as number;
      if (Number.isNaN(x)) return 'nan';
      if (x === Number.POSITIVE_INFINITY) return 'inf';
      if (x === Number.NEGATIVE_INFINITY) return '-inf';
      return x;
    }
    case 'decimal':
      return fixedPoint(String(v), t.scale);
    case 'binary':
      return Buffer.from(v as Uint8Array).toString('hex');
    case 'date':
      return new Date((v as number) * 86_400_000).toISOString().slice(0, 10);
    case 'timestamp':
      return `${isoMicros(BigInt(v as bigint))}${t.utc ? '+00:00' : ''}`;
    case 'list':
      return (v as unknown[]).map((e) => expectedValue(t.element, e));
    default:
      return v;
  }
}

/** Decimal text at exactly `scale` fractional digits, as Python's format(Decimal, 'f') prints it. */
function fixedPoint(text: string, scale: number): string {
  const negative = text.startsWith('-');
  const [int, frac = ''] = (negative ? text.slice(1) : text).split('.');
  const digits = frac.padEnd(scale, '0');
  if (/[^0]/.test(digits.slice(scale))) throw new Error(`${text} has more than ${scale} fractional digits`);
  const unscaled = BigInt(`${int}${digits.slice(0, scale)}`);
  const body = scale === 0 ? unscaled.toString() : formatScaled(unscaled, scale);
  return negative && unscaled !== 0n ? `-${body}` : body;
}

function formatScaled(unscaled: bigint, scale: number): string {
  const s = unscaled.toString().padStart(scale + 1, '0');
  return `${s.slice(0, s.length - scale)}.${s.slice(s.length - scale)}`;
}

/** `YYYY-MM-DDTHH:MM:SS.ffffff` of microseconds since 1970 (years 1..9999). */
function isoMicros(micros: bigint): string {
  let ms = micros / 1000n;
  if (micros < 0n && ms * 1000n !== micros) ms -= 1n;
  const us = micros - ms * 1000n;
  const iso = new Date(Number(ms)).toISOString(); // ...SS.mmmZ
  return `${iso.slice(0, 23)}${us.toString().padStart(3, '0')}`;
}
