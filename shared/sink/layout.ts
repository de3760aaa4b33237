/**
 * Object layout of the lake: where the object a writer starts at a position lives, and back.
 * `<prefix>/<table>/<writer>.<startPosition>.f<fence>.parquet` (docs/decisions/0002-object-layout.md
 * and its amendments), where `writer` is `<pipeline>.<source>` and `fence` the writing run's
 * lease fence as 8 lowercase hex digits.
 *
 * Owns: the ASCII-safe, deterministic, reversible encoding of table names, writer identities,
 * start positions and fences into object keys. Names derive ONLY from the table, the writer, the
 * committed start position and the lease fence, so a retry by the same run (same fence)
 * overwrites its own object, a writer that lost its lease (lower fence) can never take the name
 * of what a later holder wrote from the same position, two writers (pipelines, shards) can share
 * one lake table, and recovery can tell from a listing which objects are its own and start at or
 * after its committed position. Never uses the wall clock, a random id or the attempt's identity
 * in a data object's name (only `tidemark check`'s test object, outside every table folder, has
 * one: `probeKey`).
 *
 * Fence: `.f` + 8 hex digits right before `.parquet` (never `~` + 16 hex, which is a shortened
 * name's hash). Names written before fences (`<writer>.<startPosition>.parquet`) still parse, with
 * no fence. A position never contains `.` (position.ts: `[a-z0-9]`), so a legacy name is never
 * mistaken for a fenced one.
 *
 * Encoding of one path segment: bytes of the UTF-8 text in [a-z0-9._-] stay, every other byte
 * (uppercase letters included, so the encoding stays injective) becomes `%XX` (uppercase hex).
 * A leading `.` or `_` is escaped too: Athena, Hive, Spark and Trino skip files and folders whose
 * names start with either.
 *
 * Writer: `<pipeline>.<source>`, both from the spec, whose names cannot contain `.` (pipeline:
 * `[a-z0-9][a-z0-9-]*`, source: `[a-z0-9_-]+`, 63 characters each at most), so the first two
 * dots of a name end the writer and the rest is the position. Names without a writer (written
 * before writers were named) parse as foreign: no writer ever deletes them.
 *
 * Long positions: a position whose encoded form exceeds `MAX_PLAIN_NAME` characters is named
 * `<writer>.<first 80 encoded chars>~<16 hex of sha256(position)>.f<fence>.parquet` (file names
 * stay far below the 255-byte limit of local file systems). `~` sorts after every plain
 * character, and the visible prefix still orders the name against most positions; when it cannot
 * (another position shares that prefix), the full position is read from the object's sidecar
 * `_<stem>.pos` (the stem includes the fence), a hidden object readers skip (see
 * `parquet-sink.ts`).
 *
 * Partition parts: a page of a partitioned Iceberg table is one data file per partition value
 * (Iceberg requires one partition tuple per file), named `<writer>.<position>.f<fence>.p<part>.parquet`
 * with `part` 6 decimal digits from 000000 in the order the page first meets each partition value.
 * Every part of a page has the page's position, so recovery places it exactly like a single
 * file; a shortened name's part has its own sidecar (`_<stem>.p<part>.pos`). An unpartitioned
 * table's names have no part, as before.
 *
 * Name order: the position schemes (position.ts) use only `[a-z0-9]`, which encoding keeps as
 * is. For such a position C, `<writer>.<C>` (`positionListBound`) sorts below the name of every
 * object of the writer starting at or after C (a name continues past its position with `.f`,
 * `.parquet`, `~` or more position characters, and where its position differs from C it is
 * greater) and above every plain name starting before C (its position ends with `.`, which sorts
 * below every position character, or differs downwards). So recovery lists from there (S3
 * StartAfter) instead of the whole folder; a shortened name starting before C may still follow
 * the bound, and recovery places every listed name exactly. A position with escaped characters
 * (no scheme writes one) could sort below the bound and would then be kept, never deleted.
 */
import { createHash } from 'node:crypto';
import { SinkError } from '../contracts/errors.js';
import type { Position } from '../contracts/source.js';

/** File extension of data objects. */
export const PARQUET_SUFFIX = '.parquet';
/** File extension of the sidecar that holds the full start position of a hashed name. */
export const SIDECAR_SUFFIX = '.pos';
/** Prefix of sidecar names: `_` makes readers skip them. */
export const SIDECAR_PREFIX = '_';
/** Encoded positions longer than this are shortened to a prefix and a hash. */
export const MAX_PLAIN_NAME = 100;
/** Length of the visible prefix of a shortened name (may be less so no `%XX` is cut). */
export const HASHED_PREFIX_LENGTH = 80;
/** Separator between the visible prefix and the hash; sorts after every encoded character. */
export const HASH_SEPARATOR = '~';
const HASH_HEX_LENGTH = 16;
/** What precedes the fence's 8 hex digits at the end of a name's stem. */
export const FENCE_MARK = '.f';
const FENCE_HEX_LENGTH = 8;
/** The largest fence a name can carry (2^32 - 1, as in `__pos`). */
export const MAX_NAME_FENCE = 2 ** (FENCE_HEX_LENGTH * 4) - 1;
const FENCE_TAIL = /\.f([0-9a-f]{8})$/;
/** What precedes a partition part's 6 decimal digits, after the fence. */
export const PART_MARK = '.p';
const PART_DIGITS = 6;
/** The most parts (partition values) one page may write. */
export const MAX_PARTS = 10 ** PART_DIGITS;
const PART_TAIL = /(\.f[0-9a-f]{8})\.p([0-9]{6})$/;

const SAFE_BYTE = /[a-z0-9._-]/;
const PLAIN_NAME = /^(?:[a-z0-9._-]|%[0-9A-F]{2})+$/;
const HASHED_NAME = /^((?:[a-z0-9._-]|%[0-9A-F]{2})+)~([0-9a-f]{16})$/;
/** `<pipeline>.<source>`: the spec's name rules, so a writer never needs escaping. */
const WRITER = /^[a-z0-9][a-z0-9-]{0,62}\.[a-z0-9_-]{1,63}$/;
/** A name's writer part: the text up to (not including) its second dot. */
const WRITER_PREFIX = /^([a-z0-9][a-z0-9-]{0,62}\.[a-z0-9_-]{1,63})\./;

/**
 * The identity of whoever writes a lake table's objects: the pipeline and the spec's source
 * name, `<pipeline>.<source>`. Part of every object name, so recovery only ever considers
 * objects of its own writer.
 */
export function writerId(pipeline: string, source: string): string {
  const writer = `${pipeline}.${source}`;
  if (!WRITER.test(writer)) {
    throw new SinkError(
      'SINK_WRITER_NAME',
      writer,
      `cannot name objects for pipeline "${pipeline}" and source "${source}": the pipeline must be lowercase letters, digits and dashes, the source lowercase letters, digits, "_" and "-", each at most 63 characters`,
    );
  }
  return writer;
}

/** Encodes one path segment as the module comment says. Empty text stays empty. */
export function encodeSegment(text: string): string {
  let out = '';
  const bytes = Buffer.from(text, 'utf8');
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    const ch = String.fromCharCode(b);
    const hiddenStart = i === 0 && (ch === '.' || ch === '_');
    out +=
      b < 0x80 && SAFE_BYTE.test(ch) && !hiddenStart
        ? ch
        : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Inverse of `encodeSegment`. */
export function decodeSegment(segment: string): string {
  return decodeURIComponent(segment);
}

/** The key prefix (ending in `/`) under which a table's objects live. */
export function tablePrefix(prefix: string, table: string): string {
  if (table.length === 0)
    throw new SinkError('SINK_TABLE_NAME', table, 'lake table name is empty; set a target name');
  const root = prefix.replace(/^\/+|\/+$/g, '');
  return `${root ? `${root}/` : ''}${encodeSegment(table)}/`;
}

/** Name prefix of `tidemark check`'s test objects: `_` makes Athena, Hive, Spark and Trino skip them. */
export const PROBE_PREFIX = '_tidemark-check.';

/**
 * The key of a `tidemark check` test object: directly under the lake prefix (where the function
 * may put and delete) and in no table's folder, so no listing, recovery or reader ever sees it,
 * and deleting it leaves no folder behind. The only name with a random part: it lives for one
 * put and one delete.
 */
export function probeKey(prefix: string, id: string): string {
  const root = prefix.replace(/^\/+|\/+$/g, '');
  return `${root ? `${root}/` : ''}${PROBE_PREFIX}${encodeSegment(id)}`;
}

/** How a writer's start position appears in an object name. */
export interface ObjectName {
  /** The name without its folder, e.g. `shop.app.j00000000000100000003.f00000003.parquet`. */
  readonly name: string;
  /** Set when the name is shortened: the name of the sidecar that holds the full position. */
  readonly sidecar: string | undefined;
}

/** A fence as it appears in a name: `.f` + 8 lowercase hex digits. */
export function fenceSuffix(table: string, fence: number): string {
  if (!Number.isSafeInteger(fence) || fence < 1 || fence > MAX_NAME_FENCE) {
    throw new SinkError(
      'SINK_FENCE',
      table,
      `cannot name an object of ${table} for fence ${fence}: a fence is the writing run's lease fence, an integer in 1..${MAX_NAME_FENCE}`,
    );
  }
  return FENCE_MARK + fence.toString(16).padStart(FENCE_HEX_LENGTH, '0');
}

/**
 * Names the object `writer` starts at `startPosition` under lease fence `fence` (and its
 * sidecar, when shortened). `fence` undefined gives the name an object had before fences, for
 * recognising such names only: every write passes its fence.
 */
export function objectName(
  table: string,
  writer: string,
  startPosition: Position,
  fence: number | undefined,
  part?: number,
): ObjectName {
  if (!WRITER.test(writer)) {
    throw new SinkError(
      'SINK_WRITER_NAME',
      table,
      `cannot name an object of ${table} for writer "${writer}": a writer is "<pipeline>.<source>" (see writerId)`,
    );
  }
  if (startPosition.length === 0) {
    throw new SinkError(
      'SINK_START_POSITION',
      table,
      `cannot name an object of ${table} for an empty start position; the engine must pass the committed position`,
    );
  }
  const tail = (fence === undefined ? '' : fenceSuffix(table, fence)) + partSuffix(table, fence, part);
  const encoded = encodeSegment(startPosition);
  if (encoded.length <= MAX_PLAIN_NAME)
    return { name: `${writer}.${encoded}${tail}${PARQUET_SUFFIX}`, sidecar: undefined };
  let cut = HASHED_PREFIX_LENGTH;
  // Never cut a %XX escape in half: the visible prefix must decode to a prefix of the position.
  const lastEscape = encoded.lastIndexOf('%', cut - 1);
  if (lastEscape >= 0 && lastEscape > cut - 3) cut = lastEscape;
  const hash = createHash('sha256').update(startPosition, 'utf8').digest('hex').slice(0, HASH_HEX_LENGTH);
  const stem = `${writer}.${encoded.slice(0, cut)}${HASH_SEPARATOR}${hash}${tail}`;
  return { name: stem + PARQUET_SUFFIX, sidecar: SIDECAR_PREFIX + stem + SIDECAR_SUFFIX };
}

/** A partition part as it appears in a name (after the fence): `.p` + 6 decimal digits; '' for none. */
function partSuffix(table: string, fence: number | undefined, part: number | undefined): string {
  if (part === undefined) return '';
  if (fence === undefined || !Number.isSafeInteger(part) || part < 0 || part >= MAX_PARTS)
    throw new SinkError(
      'SINK_START_POSITION',
      table,
      `cannot name part ${part} of a page of ${table}: a page writes at most ${MAX_PARTS} partition values, each under the run's lease fence`,
    );
  return PART_MARK + String(part).padStart(PART_DIGITS, '0');
}

/**
 * The stem a page's files share: an object name without `.parquet` and without its partition
 * part (`<writer>.<position>.f<fence>`), the id of the page's Iceberg commit.
 */
export function pageStem(name: string): string {
  const stem = name.endsWith(PARQUET_SUFFIX) ? name.slice(0, -PARQUET_SUFFIX.length) : name;
  const p = PART_TAIL.exec(stem);
  return p ? stem.slice(0, -(PART_MARK.length + PART_DIGITS)) : stem;
}

/** The key prefix under which `writer`'s objects of `table` live (folder + `<writer>.`). */
export function writerPrefix(prefix: string, table: string, writer: string): string {
  return `${tablePrefix(prefix, table)}${writer}.`;
}

/**
 * The lower bound of a listing that must return every object (or, with `sidecars`, every
 * sidecar) of `writer` starting at or after `position`: `<table folder><writer>.<position>`,
 * itself no object's key (see "Name order" in the module comment). For S3's StartAfter.
 */
export function positionListBound(
  prefix: string,
  table: string,
  writer: string,
  position: Position,
  sidecars = false,
): string {
  return `${tablePrefix(prefix, table)}${sidecars ? SIDECAR_PREFIX : ''}${writer}.${encodeSegment(position)}`;
}

/**
 * The full key of the object `writer` starts at `startPosition` under `fence` (undefined: the
 * name from before fences), and of its sidecar when shortened.
 */
export function objectKey(
  prefix: string,
  table: string,
  writer: string,
  startPosition: Position,
  fence: number | undefined,
  part?: number,
): { key: string; sidecarKey: string | undefined } {
  const dir = tablePrefix(prefix, table);
  const { name, sidecar } = objectName(table, writer, startPosition, fence, part);
  return { key: dir + name, sidecarKey: sidecar === undefined ? undefined : dir + sidecar };
}

/**
 * What an object name says about its writer, start position and fence (`fence` undefined: a
 * name from before fences).
 */
export type ParsedName =
  /** The whole start position. */
  | {
      readonly kind: 'plain';
      readonly writer: string;
      readonly position: Position;
      readonly fence: number | undefined;
      /** The partition part of a partitioned table's page; undefined for a page's only file. */
      readonly part?: number;
    }
  /**
   * A shortened name: `visible` is a proper prefix of the start position, `hash` the first 16 hex
   * digits of its sha256, `sidecar` the sidecar's name in the same folder.
   */
  | {
      readonly kind: 'hashed';
      readonly writer: string;
      readonly visible: string;
      readonly hash: string;
      readonly sidecar: string;
      readonly fence: number | undefined;
      readonly part?: number;
    };

/**
 * Parses an object name (no folder) back to its writer and start position. Returns undefined for
 * anything this layout did not write (sidecars, temp files, foreign objects, names without a
 * writer): the sink never touches those.
 */
export function parseObjectName(name: string): ParsedName | undefined {
  if (!name.endsWith(PARQUET_SUFFIX)) return undefined;
  const w = WRITER_PREFIX.exec(name);
  if (!w) return undefined;
  const writer = w[1]!;
  const full = name.slice(0, -PARQUET_SUFFIX.length);
  let stem = full.slice(writer.length + 1);
  let part: number | undefined;
  const p = PART_TAIL.exec(stem);
  if (p) {
    part = Number(p[2]);
    stem = stem.slice(0, -(PART_MARK.length + PART_DIGITS));
  }
  const withPart = part === undefined ? {} : { part };
  let fence: number | undefined;
  const f = FENCE_TAIL.exec(stem);
  if (f) {
    fence = Number.parseInt(f[1]!, 16);
    // Fence 0 is never handed out: such a name is not ours.
    if (fence === 0) return undefined;
    stem = stem.slice(0, -(FENCE_MARK.length + FENCE_HEX_LENGTH));
  }
  if (PLAIN_NAME.test(stem)) {
    // Reject non-canonical spellings (e.g. `%61` for `a`): they cannot be ours, and accepting
    // them would let two keys claim one position.
    const position = safeDecode(stem);
    if (position === undefined || encodeSegment(position) !== stem || stem.length > MAX_PLAIN_NAME)
      return undefined;
    return { kind: 'plain', writer, position, fence, ...withPart };
  }
  const m = HASHED_NAME.exec(stem);
  if (!m) return undefined;
  const visible = safeDecode(m[1]!);
  if (visible === undefined || encodeSegment(visible) !== m[1]) return undefined;
  return {
    kind: 'hashed',
    writer,
    visible,
    hash: m[2]!,
    sidecar: SIDECAR_PREFIX + full + SIDECAR_SUFFIX,
    fence,
    ...withPart,
  };
}

/** If `name` is a sidecar, the name of the data object it belongs to. */
export function sidecarTarget(name: string): string | undefined {
  if (!name.startsWith(SIDECAR_PREFIX) || !name.endsWith(SIDECAR_SUFFIX)) return undefined;
  const data = name.slice(SIDECAR_PREFIX.length, -SIDECAR_SUFFIX.length) + PARQUET_SUFFIX;
  return parseObjectName(data)?.kind === 'hashed' ? data : undefined;
}

function safeDecode(s: string): string | undefined {
  try {
    return decodeSegment(s);
  } catch {
    return undefined;
  }
}

/**
 * Compares a parsed name's start position with `position` (plain string order, the order
 * positions are defined to sort in). Returns -1, 0 or 1, or `undefined` when a shortened name
 * cannot be ordered from its visible prefix alone (the caller reads the sidecar).
 */
export function compareNameToPosition(parsed: ParsedName, position: Position): -1 | 0 | 1 | undefined {
  if (parsed.kind === 'plain') return compareStrings(parsed.position, position);
  const { visible } = parsed;
  const head = position.slice(0, visible.length);
  if (head !== visible) return compareStrings(visible, head);
  // The object's position is `visible` plus at least one more character.
  if (position.length === visible.length) return 1;
  return undefined;
}

/** Plain code-unit string order, the order positions sort in. */
export function compareStrings(a: string, b: string): -1 | 0 | 1 {
  return a < b ? -1 : a > b ? 1 : 0;
}
