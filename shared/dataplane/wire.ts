/**
 * The WIRE schema: the Arrow schema of a table's batches between a source and a sink.
 *
 * Data columns come first, in canonical schema order, then the six metadata columns
 * (`metadata.ts`). Data column Arrow types are chosen so that the lake cast (`lake.ts`) only has
 * to touch the metadata tail: timestamps are already microseconds, unsigned 64-bit integers are
 * already decimal(20,0), lists name their child `element`.
 */
import {
  Schema as ArrowSchema,
  Binary,
  Bool,
  type DataType,
  DateDay,
  Decimal,
  Field,
  Float64,
  Int8,
  Int16,
  Int32,
  Int64,
  List,
  Timestamp,
  TimeUnit,
  Utf8,
} from 'apache-arrow';
import { isMetadataColumn, metadataFields } from './metadata.js';
import type { LogicalType, Schema } from './schema.js';

/** The Arrow type a logical type travels as on the wire. */
export function wireType(t: LogicalType): DataType {
  switch (t.kind) {
    case 'bool':
      return new Bool();
    case 'int8':
      return new Int8();
    case 'int16':
      return new Int16();
    case 'int32':
      return new Int32();
    case 'int64':
      return new Int64();
    case 'float64':
      return new Float64();
    case 'decimal':
      return new Decimal(t.scale, t.precision, 128);
    case 'text':
      return new Utf8();
    case 'binary':
      return new Binary();
    case 'date':
      return new DateDay();
    case 'timestamp':
      return new Timestamp(TimeUnit.MICROSECOND, t.utc ? 'UTC' : null);
    case 'list':
      return new List(new Field('element', wireType(t.element), true));
  }
}

/** The table's wire schema: data columns in schema order, then the metadata tail. */
export function wireSchema(schema: Schema): ArrowSchema {
  const data = schema.columns.map((c) => {
    if (isMetadataColumn(c.name)) {
      throw new Error(`column "${c.name}" collides with a tidemark metadata column; rename it or exclude it`);
    }
    return new Field(c.name, wireType(c.type), c.nullable);
  });
  return new ArrowSchema([...data, ...metadataFields()]);
}
