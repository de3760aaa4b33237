/**
 * The six metadata columns every wire record carries after its data columns, in this order:
 * `__op`, `__pos`, `__commit_ts`, `__ingest_ts`, `__snapshot`, `__phase`. All six are born at the
 * source encoder; nothing downstream injects them.
 *
 * Incremental rows cannot tell an insert from an update: they carry `__op = u` (1), never `c`.
 */
import { Bool, Field, Timestamp, TimeUnit, Uint8, Utf8 } from 'apache-arrow';

/** `__op` values on the wire (uint8). */
export const Op = { create: 0, update: 1, delete: 2 } as const;
export type OpCode = (typeof Op)[keyof typeof Op];
/** `__op` as its one-letter lake spelling, indexed by the wire code. */
export const OP_LETTERS = ['c', 'u', 'd'] as const;

/** `__phase` values: a closed set. */
export const PHASES = ['incremental', 'snapshot', 'stream'] as const;
export type Phase = (typeof PHASES)[number];

export const META_OP = '__op';
export const META_POS = '__pos';
export const META_COMMIT_TS = '__commit_ts';
export const META_INGEST_TS = '__ingest_ts';
export const META_SNAPSHOT = '__snapshot';
export const META_PHASE = '__phase';

/** The metadata column names in wire order. */
export const METADATA_COLUMNS = [
  META_OP,
  META_POS,
  META_COMMIT_TS,
  META_INGEST_TS,
  META_SNAPSHOT,
  META_PHASE,
] as const;

/** The Arrow fields of the metadata tail, in wire order. */
export function metadataFields(): Field[] {
  return [
    new Field(META_OP, new Uint8(), false),
    new Field(META_POS, new Utf8(), false),
    new Field(META_COMMIT_TS, new Timestamp(TimeUnit.NANOSECOND, 'UTC'), true),
    new Field(META_INGEST_TS, new Timestamp(TimeUnit.NANOSECOND, 'UTC'), false),
    new Field(META_SNAPSHOT, new Bool(), false),
    new Field(META_PHASE, new Utf8(), false),
  ];
}

/** True when `name` is reserved for metadata (source columns may not use the `__` prefix names). */
export function isMetadataColumn(name: string): boolean {
  return (METADATA_COLUMNS as readonly string[]).includes(name);
}
