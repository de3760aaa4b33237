/**
 * The rows of one write of a partitioned Iceberg table split by partition value: one group per
 * partition tuple, each the data file's rows and its tuple in the Avro form a manifest lists
 * (shared/iceberg/manifest.ts), as Iceberg requires one partition tuple per data file
 * (docs/iceberg.md "Partitions").
 *
 * Owns: reading a partition source column's values from wire records (raw Arrow buffers, never
 * `Vector.get`, which rounds microsecond timestamps to milliseconds; `__commit_ts` travels as
 * nanoseconds and is floored to the microseconds the lake holds), the transforms applied
 * (shared/iceberg/transforms.ts), and the row selection (shared/sink/collapse.ts `takeRecord`).
 * Groups come in the order the write first meets each tuple, rows in their order; a record
 * whose rows all share one tuple is kept as it is (no copy). Only called for a partitioned table:
 * an unpartitioned write never comes here.
 */
import { type Data, DataType, type RecordBatch, TimeUnit } from 'apache-arrow';
import { TidemarkError } from '../contracts/errors.js';
import type { AvroValue } from '../iceberg/avro-schema.js';
import { primitiveOf, type SingleValue } from '../iceberg/single-value.js';
import type { IcebergPartitionSpec, IcebergSchema } from '../iceberg/spec.js';
import { transformOf } from '../iceberg/transforms.js';
import { takeRecord } from './collapse.js';
import { MAX_PARTS } from './layout.js';

/** One partition field, ready to apply: its name, source column and transform. */
interface PlannedField {
  readonly name: string;
  readonly column: string;
  readonly apply: (v: SingleValue | null) => AvroValue;
}

/** How a partitioned table's rows are split: its spec and each field's transform. */
export interface PartitionPlan {
  readonly spec: IcebergPartitionSpec;
  readonly fields: readonly PlannedField[];
}

/** One data file's worth of a write: its partition tuple and its rows. */
export interface PartitionGroup {
  readonly partition: Readonly<Record<string, AvroValue>>;
  readonly records: RecordBatch[];
}

/** The plan of `spec` over `schema`; undefined for an unpartitioned spec (nothing to split). */
export function partitionPlanOf(
  spec: IcebergPartitionSpec,
  schema: IcebergSchema,
): PartitionPlan | undefined {
  if (spec.fields.length === 0) return undefined;
  const fields = spec.fields.map((f) => {
    const source = schema.fields.find((c) => c.id === f['source-id']);
    const type = source === undefined ? undefined : primitiveOf(source.type);
    if (source === undefined || type === undefined)
      throw new TidemarkError(
        'ICEBERG_METADATA_INVALID',
        `partition field ${f.name}: its source column (id ${f['source-id']}) is not a primitive column of the table's current schema`,
      );
    return { name: f.name, column: source.name, apply: transformOf(f.transform, type) };
  });
  return { spec, fields };
}

const decoder = new TextDecoder();

/** A reader of a wire column's value at a row, as an Iceberg value (transforms.ts's input). */
function valueReader(data: Data, column: string): (row: number) => SingleValue | null {
  const { type } = data;
  const valid = (row: number) => data.nullCount === 0 || data.getValid(row);
  if (DataType.isUtf8(type)) {
    const offsets = data.valueOffsets as Int32Array;
    const values = data.values as Uint8Array;
    return (row) => (valid(row) ? decoder.decode(values.subarray(offsets[row]!, offsets[row + 1]!)) : null);
  }
  if (DataType.isBinary(type)) {
    const offsets = data.valueOffsets as Int32Array;
    const values = data.values as Uint8Array;
    return (row) => (valid(row) ? values.slice(offsets[row]!, offsets[row + 1]!) : null);
  }
  if (DataType.isBool(type)) {
    const bits = data.values as Uint8Array;
    return (row) => {
      const at = data.offset + row;
      return valid(row) ? (bits[at >> 3]! & (1 << (at & 7))) !== 0 : null;
    };
  }
  if (DataType.isDecimal(type)) {
    const words = data.values as Uint32Array;
    return (row) => {
      if (!valid(row)) return null;
      let v = 0n;
      for (let w = 3; w >= 0; w--) v = (v << 32n) | BigInt(words[4 * row + w]!);
      return BigInt.asIntN(128, v);
    };
  }
  if (DataType.isTimestamp(type)) {
    const values = data.values as BigInt64Array;
    const unit = type.unit;
    const per = unit === TimeUnit.NANOSECOND ? 1000n : unit === TimeUnit.MICROSECOND ? 1n : undefined;
    if (per === undefined)
      throw new Error(`partition column "${column}": timestamp unit ${unit} is not a lake unit`);
    return (row) => {
      if (!valid(row)) return null;
      const v = values[row]!;
      if (per === 1n) return v;
      // Floor, as the lake cast does (shared/dataplane/lake.ts), pre-1970 included.
      const q = v / per;
      return v % per < 0n ? q - 1n : q;
    };
  }
  if (DataType.isInt(type) && type.bitWidth === 64) {
    const values = data.values as BigInt64Array;
    return (row) => (valid(row) ? values[row]! : null);
  }
  if (DataType.isInt(type) || DataType.isFloat(type) || DataType.isDate(type)) {
    // Fixed-width values are pre-sliced in Arrow JS; DateDay holds days.
    const values = data.values as ArrayLike<number>;
    return (row) => (valid(row) ? values[row]! : null);
  }
  throw new Error(
    `partition column "${column}" has type ${String(type)}, which tidemark cannot partition on`,
  );
}

/** A tuple's map key: each value typed and length-prefixed, so distinct tuples never collide. */
function tupleKey(values: readonly AvroValue[]): string {
  let k = '';
  for (const v of values) {
    if (v === null) k += 'n;';
    else if (v instanceof Uint8Array) k += `x${Buffer.from(v).toString('hex')};`;
    else if (typeof v === 'string') k += `s${v.length}:${v}`;
    else k += `${typeof v === 'bigint' ? 'b' : typeof v === 'boolean' ? 'o' : 'd'}${String(v)};`;
  }
  return k;
}

/**
 * Splits `records` (wire records of one table, one write) into one group per partition tuple.
 *
 * @throws TidemarkError `ICEBERG_PARTITION_INVALID` when the write has more partition values than
 *   one page may name (layout.ts `MAX_PARTS`).
 */
export function splitByPartition(
  table: string,
  records: readonly RecordBatch[],
  plan: PartitionPlan,
): PartitionGroup[] {
  const groups = new Map<string, { partition: Record<string, AvroValue>; records: RecordBatch[] }>();
  for (const record of records) {
    const readers = plan.fields.map((f) => {
      const i = record.schema.fields.findIndex((c) => c.name === f.column);
      const data = record.data.children[i];
      if (data === undefined)
        throw new Error(`partition column "${f.column}" is not in the record of ${table}`);
      return valueReader(data, f.column);
    });
    const rowsOf = new Map<string, number[]>();
    const tuples = new Map<string, AvroValue[]>();
    for (let row = 0; row < record.numRows; row++) {
      const tuple = plan.fields.map((f, i) => f.apply(readers[i]!(row)));
      const key = tupleKey(tuple);
      let rows = rowsOf.get(key);
      if (rows === undefined) {
        rows = [];
        rowsOf.set(key, rows);
        tuples.set(key, tuple);
      }
      rows.push(row);
    }
    for (const [key, rows] of rowsOf) {
      let group = groups.get(key);
      if (group === undefined) {
        if (groups.size >= MAX_PARTS)
          throw new TidemarkError(
            'ICEBERG_PARTITION_INVALID',
            `${table}: one write would make more than ${MAX_PARTS} data files, one per partition value; use a coarser partition transform (fewer buckets, a wider truncate, day instead of hour)`,
          );
        const tuple = tuples.get(key)!;
        group = {
          partition: Object.fromEntries(plan.fields.map((f, i) => [f.name, tuple[i]!])),
          records: [],
        };
        groups.set(key, group);
      }
      group.records.push(rows.length === record.numRows ? record : takeRecord(record, Int32Array.from(rows)));
    }
  }
  return [...groups.values()];
}
