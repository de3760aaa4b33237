/**
 * Iceberg table metadata (shared/iceberg/metadata.ts, metadata-json.ts): a new table's fields, an
 * append's sequence number, parent, summary counters and commit id, schema changes, expiry, and
 * the exact JSON of 63-bit snapshot ids. A property-based run of random appends (by several
 * writers, with clocks that go back), schema changes, property changes, metadata-log records and
 * expiries checks after every step that sequence numbers grow, the parent chain of what is kept is
 * intact, the current snapshot is never expired, the metadata log stays within its cap, time never
 * goes back, totals add up, every writer's last commit is found, and the metadata survives its
 * own JSON.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TidemarkError } from '../../shared/contracts/errors.js';
import {
  appendSnapshot,
  COMMIT_ID_SUMMARY_KEY,
  currentSnapshot,
  expireSnapshots,
  hasCommit,
  NO_SNAPSHOT,
  newSnapshotId,
  newTableMetadata,
  PREVIOUS_VERSIONS_MAX_PROPERTY,
  recordPreviousMetadata,
  setProperties,
  setSchema,
  writerCommitProperty,
  writerDiscardProperty,
  writerPositionProperty,
} from '../../shared/iceberg/metadata.js';
import {
  parseJson,
  parseTableMetadata,
  serializeTableMetadata,
  stringifyJson,
} from '../../shared/iceberg/metadata-json.js';
import type { IcebergSchema, IcebergTableMetadata, SnapshotId } from '../../shared/iceberg/spec.js';

const T0 = 1_765_000_000_000;
const SCHEMA: Omit<IcebergSchema, 'schema-id'> = {
  type: 'struct',
  'identifier-field-ids': [1],
  fields: [
    { id: 1, name: 'id', required: true, type: 'long' },
    { id: 2, name: 'name', required: false, type: 'string' },
  ],
};
const WIDER: Omit<IcebergSchema, 'schema-id'> = {
  ...SCHEMA,
  fields: [
    ...SCHEMA.fields,
    {
      id: 3,
      name: 'tags',
      required: false,
      type: { type: 'list', 'element-id': 4, element: 'string', 'element-required': false },
    },
  ],
};

function table(properties: Record<string, string> = {}): IcebergTableMetadata {
  return newTableMetadata({
    location: 's3://lake/wh/orders/',
    schema: SCHEMA,
    lastColumnId: 2,
    properties,
    uuid: '1b2c3d4e-0000-4000-8000-000000000001',
    nowMs: T0,
  });
}

function append(
  base: IcebergTableMetadata,
  commitId: string,
  nowMs: number,
  records = 10,
  writerId = 'shop.app',
): IcebergTableMetadata {
  return appendSnapshot(base, {
    snapshotId: newSnapshotId(base),
    manifestListPath: `${base.location}/metadata/snap-${commitId}.avro`,
    added: { dataFiles: 1, records, filesSize: 1000 + records },
    commit: { writerId, commitId },
    nowMs,
  });
}

/** Expects `fn` to throw a TidemarkError with `code`. */
function expectCode(fn: () => unknown, code: string): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(TidemarkError);
    expect((e as TidemarkError).code).toBe(code);
    return;
  }
  throw new Error(`expected ${code}, nothing was thrown`);
}

/** `v`, a JSON tree, with each bigint in it replaced by `f` of it. */
function mapBigints(v: unknown, f: (b: bigint) => unknown): unknown {
  if (typeof v === 'bigint') return f(v);
  if (Array.isArray(v)) return v.map((x) => mapBigints(x, f));
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapBigints(x, f)]));
  return v;
}

describe('a new table', () => {
  it('is format v2 with schema, spec and sort order 0 and no snapshot', () => {
    const m = table({ 'write.format.default': 'parquet' });
    expect(m).toMatchObject({
      'format-version': 2,
      location: 's3://lake/wh/orders',
      'last-sequence-number': 0,
      'last-column-id': 2,
      'current-schema-id': 0,
      'default-spec-id': 0,
      'partition-specs': [{ 'spec-id': 0, fields: [] }],
      'last-partition-id': 999,
      'default-sort-order-id': 0,
      'sort-orders': [{ 'order-id': 0, fields: [] }],
      'current-snapshot-id': -1n,
      snapshots: [],
      refs: {},
      properties: { 'write.format.default': 'parquet' },
    });
    expect(m.schemas).toEqual([{ ...SCHEMA, 'schema-id': 0 }]);
    expect(currentSnapshot(m)).toBeUndefined();
    // The file says -1, as Iceberg Java writes it.
    expect(serializeTableMetadata(m)).toContain('"current-snapshot-id":-1');
  });

  it('takes last-column-id from the schema when the caller gave less', () => {
    expect(
      newTableMetadata({ ...optionsOf(table()), schema: WIDER, lastColumnId: 2 })['last-column-id'],
    ).toBe(4);
  });
});

function optionsOf(m: IcebergTableMetadata) {
  return {
    location: m.location,
    schema: SCHEMA,
    lastColumnId: 2,
    properties: {},
    uuid: m['table-uuid'],
    nowMs: T0,
  };
}

describe('appendSnapshot', () => {
  it('chains snapshots: sequence numbers, parents, refs, logs, counters and the commit id', () => {
    const m0 = table();
    const m1 = append(m0, 'c1', T0 + 1000, 5);
    const m2 = append(m1, 'c2', T0 + 2000, 7);
    const [s1, s2] = m2.snapshots;
    expect(s1!['sequence-number']).toBe(1);
    expect(s1!['parent-snapshot-id']).toBeUndefined();
    expect(s2!['sequence-number']).toBe(2);
    expect(s2!['parent-snapshot-id']).toBe(s1!['snapshot-id']);
    expect(m2['last-sequence-number']).toBe(2);
    expect(m2['current-snapshot-id']).toBe(s2!['snapshot-id']);
    expect(m2.refs?.main).toEqual({ 'snapshot-id': s2!['snapshot-id'], type: 'branch' });
    expect(m2['snapshot-log'].map((e) => e['snapshot-id'])).toEqual([s1!['snapshot-id'], s2!['snapshot-id']]);
    expect(m2['last-updated-ms']).toBe(T0 + 2000);
    expect(s2!.summary).toEqual({
      operation: 'append',
      'added-data-files': '1',
      'added-records': '7',
      'added-files-size': '1007',
      'total-data-files': '2',
      'total-delete-files': '0',
      'total-records': '12',
      'total-files-size': '2012',
      'total-position-deletes': '0',
      'total-equality-deletes': '0',
      [COMMIT_ID_SUMMARY_KEY]: 'c2',
    });
    expect(s2!['schema-id']).toBe(0);
    expect(m2.properties[writerCommitProperty('shop.app')]).toBe('c2');
    expect(hasCommit(m2, 'shop.app', 'c1')).toBe(true);
    expect(hasCommit(m2, 'shop.app', 'c3')).toBe(false);
  });

  it('stamps the base time when the clock is behind, so no log goes back', () => {
    const m1 = append(table(), 'c1', T0 + 60_000);
    const m2 = append(m1, 'c2', T0 + 1_000);
    expect(m2.snapshots[1]!['timestamp-ms']).toBe(T0 + 60_000);
    expect(m2['last-updated-ms']).toBe(T0 + 60_000);
  });

  it('leaves out a total the parent does not have, as Iceberg does', () => {
    const m1 = append(table(), 'c1', T0);
    const foreign: IcebergTableMetadata = {
      ...m1,
      snapshots: [{ ...m1.snapshots[0]!, summary: { operation: 'replace' } }],
    };
    const m2 = append(foreign, 'c2', T0);
    expect(m2.snapshots[1]!.summary['total-records']).toBeUndefined();
    expect(m2.snapshots[1]!.summary['added-records']).toBe('10');
  });

  it("states a delete snapshot's removed files and lowers the totals; a total that would go below zero is left out", () => {
    const m2 = append(append(table(), 'c1', T0, 5), 'c2', T0, 7);
    const removing = (base: IcebergTableMetadata, records: number) =>
      appendSnapshot(base, {
        snapshotId: newSnapshotId(base),
        manifestListPath: 'x',
        operation: 'delete',
        added: { dataFiles: 0, records: 0, filesSize: 0 },
        removed: { dataFiles: 1, records, filesSize: 1005 },
        commit: { writerId: 'shop.app', commitId: 'discard-1' },
        nowMs: T0,
      });
    const m3 = removing(m2, 5);
    expect(m3.snapshots[2]!.summary).toEqual({
      operation: 'delete',
      'deleted-data-files': '1',
      'deleted-records': '5',
      'removed-files-size': '1005',
      'total-data-files': '1',
      'total-delete-files': '0',
      'total-records': '7',
      'total-files-size': '1007',
      'total-position-deletes': '0',
      'total-equality-deletes': '0',
      [COMMIT_ID_SUMMARY_KEY]: 'discard-1',
    });
    expect(removing(m2, 99).snapshots[2]!.summary['total-records']).toBeUndefined();
  });

  it("counts a writer's commits only from its discard mark on: a reused id is new again", () => {
    const m2 = append(append(table(), 'c1', T0), 'c2', T0);
    const marked = setProperties(m2, { [writerDiscardProperty('shop.app')]: '3' }, { nowMs: T0 });
    expect(hasCommit(marked, 'shop.app', 'c1')).toBe(false);
    // The writer's property still names its last commit (the discard's, in the real commit).
    expect(hasCommit(marked, 'shop.app', 'c2')).toBe(true);
    const m3 = append(marked, 'c1', T0);
    expect(hasCommit(m3, 'shop.app', 'c1')).toBe(true);
    expect(hasCommit(append(m3, 'c9', T0), 'shop.app', 'c1')).toBe(true);
    expect(hasCommit(append(m3, 'c9', T0), 'shop.app', 'c2')).toBe(false);
    // Another writer's mark is not this writer's.
    expect(
      hasCommit(setProperties(m2, { [writerDiscardProperty('x.y')]: '9' }, { nowMs: T0 }), 'shop.app', 'c1'),
    ).toBe(true);
  });

  it("recognises every earlier commit of a writer by its position, after its snapshot expired too; never a later one, another scheme's, or one before a discard", () => {
    // A writer's commits at increasing positions (scheme `j`), applied in order; then every
    // snapshot but the last expired (the kept metadata has only the properties to go by).
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 1e9 }), { minLength: 2, maxLength: 8 }),
        fc.integer({ min: 1, max: 1e9 }),
        (raw, probe) => {
          const positions = [...raw].sort((a, b) => a - b).map((n) => `j${String(n).padStart(12, '0')}`);
          let m = table();
          for (const p of positions)
            m = appendSnapshot(m, {
              snapshotId: newSnapshotId(m),
              manifestListPath: `${m.location}/metadata/snap-${p}.avro`,
              added: { dataFiles: 1, records: 1, filesSize: 1 },
              commit: { writerId: 'shop.app', commitId: `shop.app.${p}.f1`, position: p },
              nowMs: T0,
            });
          const last = positions.at(-1)!;
          expect(m.properties[writerPositionProperty('shop.app')]).toBe(last);
          const expired: IcebergTableMetadata = { ...m, snapshots: m.snapshots.slice(-1) };
          for (const p of positions) expect(hasCommit(expired, 'shop.app', `shop.app.${p}.f1`, p)).toBe(true);
          // A stale writer's earlier commit under another fence is an applied position too.
          const q = `j${String(probe).padStart(12, '0')}`;
          expect(hasCommit(expired, 'shop.app', `shop.app.${q}.f7`, q)).toBe(q < last);
          // Another scheme's positions are not ordered against this one's; another writer's neither.
          expect(hasCommit(expired, 'shop.app', `shop.app.a${q}.f1`, `a${q.slice(1)}`)).toBe(false);
          expect(hasCommit(expired, 'other.app', `other.app.${q}.f1`, q)).toBe(false);
          // Without a position (a state from before positions were recorded): the old rule only.
          if (positions.length > 1)
            expect(hasCommit(expired, 'shop.app', `shop.app.${positions[0]}.f1`)).toBe(false);
          // A discard (a commit without a position) drops the order: the writer starts over.
          const discarded = appendSnapshot(m, {
            snapshotId: newSnapshotId(m),
            manifestListPath: `${m.location}/metadata/snap-discard.avro`,
            operation: 'delete',
            added: { dataFiles: 0, records: 0, filesSize: 0 },
            commit: { writerId: 'shop.app', commitId: 'discard-1' },
            nowMs: T0,
          });
          expect(discarded.properties[writerPositionProperty('shop.app')]).toBeUndefined();
          const after = { ...discarded, snapshots: discarded.snapshots.slice(-1) };
          expect(hasCommit(after, 'shop.app', `shop.app.${positions[0]}.f1`, positions[0])).toBe(false);
        },
      ),
    );
  });

  it('refuses a snapshot id the table has, and a schema it does not', () => {
    const m1 = append(table(), 'c1', T0);
    const taken = m1.snapshots[0]!['snapshot-id'];
    const base = {
      manifestListPath: 'x',
      added: { dataFiles: 0, records: 0, filesSize: 0 },
      commit: { writerId: 'w', commitId: 'c' },
      nowMs: T0,
    };
    expectCode(() => appendSnapshot(m1, { ...base, snapshotId: taken }), 'ICEBERG_METADATA_INVALID');
    expectCode(() => appendSnapshot(m1, { ...base, snapshotId: 0n }), 'ICEBERG_METADATA_INVALID');
    expectCode(() => appendSnapshot(m1, { ...base, snapshotId: 1n << 63n }), 'ICEBERG_METADATA_INVALID');
    expectCode(
      () => appendSnapshot(m1, { ...base, snapshotId: 5n, schemaId: 9 }),
      'ICEBERG_METADATA_INVALID',
    );
  });
});

describe('newSnapshotId', () => {
  it('is a positive 63-bit long, and draws again on a taken id or zero', () => {
    const m1 = append(table(), 'c1', T0);
    const taken = m1.snapshots[0]!['snapshot-id'];
    const bytesOf = (id: bigint) =>
      Uint8Array.from({ length: 8 }, (_, i) => Number((id >> BigInt(56 - 8 * i)) & 0xffn));
    const draws = [bytesOf(taken), new Uint8Array(8), Uint8Array.from([0xff, 1, 2, 3, 4, 5, 6, 7])];
    const id = newSnapshotId(m1, () => draws.shift()!);
    expect(id).toBe(0x7f01020304050607n);
    expect(draws).toEqual([]);
    for (let i = 0; i < 200; i++) {
      const r = newSnapshotId(m1);
      expect(r > 0n && r < 1n << 63n).toBe(true);
    }
  });
});

describe('setSchema', () => {
  it('adds a new schema with the next id, reuses an equal one, and never lowers last-column-id', () => {
    const m0 = table();
    expect(setSchema(m0, SCHEMA, { lastColumnId: 2, nowMs: T0 })).toBe(m0);
    const m1 = setSchema(m0, WIDER, { lastColumnId: 4, nowMs: T0 + 5 });
    expect(m1['current-schema-id']).toBe(1);
    expect(m1['last-column-id']).toBe(4);
    expect(m1.schemas.map((s) => s['schema-id'])).toEqual([0, 1]);
    // Back to the first shape (column 3 dropped): schema 0 again, its ids stay spent.
    const m2 = setSchema(m1, SCHEMA, { lastColumnId: 2, nowMs: T0 + 6 });
    expect(m2['current-schema-id']).toBe(0);
    expect(m2.schemas).toHaveLength(2);
    expect(m2['last-column-id']).toBe(4);
  });
});

describe('setProperties', () => {
  it('sets and removes, and returns the base when nothing changes', () => {
    const m0 = table({ a: '1', b: '2' });
    expect(setProperties(m0, { a: '1' }, { nowMs: T0 + 1 })).toBe(m0);
    const m1 = setProperties(m0, { c: '3' }, { remove: ['a'], nowMs: T0 + 1 });
    expect(m1.properties).toEqual({ b: '2', c: '3' });
  });
});

describe('recordPreviousMetadata', () => {
  it('keeps the newest write.metadata.previous-versions-max entries and returns the rest', () => {
    let m = table({ [PREVIOUS_VERSIONS_MAX_PROPERTY]: '2' });
    const dropped: string[] = [];
    for (let v = 1; v <= 4; v++) {
      const r = recordPreviousMetadata(m, { 'metadata-file': `v${v}`, 'timestamp-ms': T0 + v });
      m = r.metadata;
      dropped.push(...r.dropped.map((e) => e['metadata-file']));
    }
    expect(m['metadata-log'].map((e) => e['metadata-file'])).toEqual(['v3', 'v4']);
    expect(dropped).toEqual(['v1', 'v2']);
  });

  it('keeps 100 by default', () => {
    let m = table();
    for (let v = 1; v <= 130; v++)
      m = recordPreviousMetadata(m, { 'metadata-file': `v${v}`, 'timestamp-ms': T0 }).metadata;
    expect(m['metadata-log']).toHaveLength(100);
    expect(m['metadata-log'][0]!['metadata-file']).toBe('v31');
  });
});

describe('expireSnapshots', () => {
  it('keeps the current snapshot, referenced ones and the newest retainLast; cuts the snapshot log at the last expired', () => {
    let m = table();
    for (let i = 1; i <= 5; i++) m = append(m, `c${i}`, T0 + i * 1000);
    const ids = m.snapshots.map((s) => s['snapshot-id']);
    // A tag on the first snapshot keeps it.
    m = { ...m, refs: { ...m.refs, audit: { 'snapshot-id': ids[0]!, type: 'tag' } } };
    const r = expireSnapshots(m, { olderThanMs: T0 + 10_000, retainLast: 2, nowMs: T0 + 20_000 });
    expect(r.expired).toEqual([ids[1], ids[2]]);
    expect(r.metadata.snapshots.map((s) => s['snapshot-id'])).toEqual([ids[0], ids[3], ids[4]]);
    expect(r.manifestLists).toEqual([
      `${m.location}/metadata/snap-c2.avro`,
      `${m.location}/metadata/snap-c3.avro`,
    ]);
    // The log before the last expired entry goes, though ids[0] itself is kept.
    expect(r.metadata['snapshot-log'].map((e) => e['snapshot-id'])).toEqual([ids[3], ids[4]]);
    expect(r.metadata['last-updated-ms']).toBe(T0 + 20_000);
    // The writer's property still finds the last commit; the expired commits' ids are gone.
    expect(hasCommit(r.metadata, 'shop.app', 'c5')).toBe(true);
    expect(hasCommit(r.metadata, 'shop.app', 'c2')).toBe(false);
  });

  it('never expires the current snapshot, even with retainLast 0', () => {
    const m = append(append(table(), 'c1', T0), 'c2', T0 + 1);
    const r = expireSnapshots(m, { olderThanMs: T0 + 1_000_000, retainLast: 0, nowMs: T0 + 2 });
    expect(r.metadata.snapshots.map((s) => s['snapshot-id'])).toEqual([m['current-snapshot-id']]);
  });

  it('drops the statistics of expired snapshots and returns their files', () => {
    let m = table();
    for (let i = 1; i <= 3; i++) m = append(m, `c${i}`, T0 + i);
    const [a, , c] = m.snapshots.map((s) => s['snapshot-id']);
    const withStats = {
      ...m,
      statistics: [
        {
          'snapshot-id': a,
          'statistics-path': 's3://x/a.stats',
          'file-size-in-bytes': 1,
          'file-footer-size-in-bytes': 1,
          'blob-metadata': [],
        },
        {
          'snapshot-id': c,
          'statistics-path': 's3://x/c.stats',
          'file-size-in-bytes': 1,
          'file-footer-size-in-bytes': 1,
          'blob-metadata': [],
        },
      ],
    } as IcebergTableMetadata;
    const r = expireSnapshots(withStats, { olderThanMs: T0 + 100, retainLast: 1, nowMs: T0 + 100 });
    expect(r.statisticsFiles).toEqual(['s3://x/a.stats']);
    expect(
      (r.metadata as unknown as { statistics: { 'snapshot-id': bigint }[] }).statistics.map(
        (s) => s['snapshot-id'],
      ),
    ).toEqual([c]);
  });
});

describe('the metadata JSON', () => {
  it('keeps integers beyond 2^53 exact, both ways', () => {
    const text =
      '{"a":9223372036854775807,"b":[-9007199254740993,1.5,2e3,9007199254740991],"c":"9223372036854775807"}';
    const v = parseJson(text) as Record<string, unknown>;
    expect(v.a).toBe(9223372036854775807n);
    expect(v.b).toEqual([-9007199254740993n, 1.5, 2000, 9007199254740991]);
    expect(v.c).toBe('9223372036854775807');
    expect(stringifyJson(v)).toBe(
      '{"a":9223372036854775807,"b":[-9007199254740993,1.5,2000,9007199254740991],"c":"9223372036854775807"}',
    );
  });

  it('reads what JSON.parse reads, the same way but for big integers, and refuses what it refuses', () => {
    // A double JSON.stringify writes without a fraction beyond 2^53 reads as the bigint of its digits.
    const asNumbers = (v: unknown) => mapBigints(v, Number);
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = JSON.stringify(value);
        expect(asNumbers(parseJson(text))).toEqual(JSON.parse(text));
        expect(stringifyJson(parseJson(text))).toBe(JSON.stringify(JSON.parse(text)));
      }),
      { numRuns: 300 },
    );
    for (const bad of ['{', '[1,]', '{"a" 1}', '"\\x"', '01', 'nul', '1 2', '"a\nb"']) {
      expect(() => parseJson(bad), bad).toThrow(SyntaxError);
    }
    expect(Object.hasOwn(parseJson('{"__proto__":{"x":1}}') as object, '__proto__')).toBe(true);
  });

  it('round-trips big integers anywhere', () => {
    const big = fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n });
    const tree = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        big,
        fc.integer(),
        fc.string(),
        fc.constant(null),
        fc.array(tie('node'), { maxLength: 4 }),
        fc.dictionary(fc.string(), tie('node'), { maxKeys: 4 }),
      ),
    })).node;
    fc.assert(
      fc.property(tree, (value) => {
        // A bigint a number holds exactly reads back as that number.
        const normal = (v: unknown) =>
          mapBigints(v, (b) => (Number.isSafeInteger(Number(b)) && BigInt(Number(b)) === b ? Number(b) : b));
        expect(parseJson(stringifyJson(value))).toEqual(normal(value));
      }),
      { numRuns: 300 },
    );
  });

  it('reads a metadata file: ids as bigint, -1 or none as no snapshot, refs derived, unknown fields kept', () => {
    const m = append(table(), 'c1', T0);
    const id = m.snapshots[0]!['snapshot-id'];
    const text = serializeTableMetadata({ ...m, 'next-row-id': 5 } as IcebergTableMetadata);
    const back = parseTableMetadata(text, 'v2.metadata.json');
    expect(back).toEqual({ ...m, 'next-row-id': 5 });
    // A writer that leaves refs and the -1 out (pyiceberg writes null).
    const bare = parseJson(serializeTableMetadata(m)) as Record<string, unknown>;
    delete bare.refs;
    const derived = parseTableMetadata(stringifyJson(bare), 'x');
    expect(derived.refs).toEqual({ main: { 'snapshot-id': id, type: 'branch' } });
    const empty = parseJson(serializeTableMetadata(table())) as Record<string, unknown>;
    empty['current-snapshot-id'] = null;
    delete empty.refs;
    delete empty.snapshots;
    expect(parseTableMetadata(stringifyJson(empty), 'x')).toMatchObject({
      'current-snapshot-id': NO_SNAPSHOT,
      refs: {},
      snapshots: [],
    });
  });

  it('refuses what is not format v2 metadata', () => {
    const good = parseJson(serializeTableMetadata(table())) as Record<string, unknown>;
    expectCode(() => parseTableMetadata('{"format-version":2', 'x'), 'ICEBERG_METADATA_INVALID');
    expectCode(
      () => parseTableMetadata(stringifyJson({ ...good, 'format-version': 1 }), 'x'),
      'ICEBERG_METADATA_INVALID',
    );
    expectCode(
      () => parseTableMetadata(stringifyJson({ ...good, 'format-version': 3 }), 'x'),
      'ICEBERG_METADATA_INVALID',
    );
    expectCode(
      () => parseTableMetadata(stringifyJson({ ...good, schemas: [] }), 'x'),
      'ICEBERG_METADATA_INVALID',
    );
    expectCode(
      () => parseTableMetadata(stringifyJson({ ...good, location: 5 }), 'x'),
      'ICEBERG_METADATA_INVALID',
    );
    expectCode(
      () => parseTableMetadata(stringifyJson({ ...good, snapshots: [{ 'snapshot-id': 1.5 }] }), 'x'),
      'ICEBERG_METADATA_INVALID',
    );
  });
});

/** One step of the property-based run. */
type Step =
  | { kind: 'append'; writer: number; records: number; clock: number }
  | { kind: 'expire'; age: number; retainLast: number }
  | { kind: 'schema'; wide: boolean }
  | { kind: 'property'; value: string }
  | { kind: 'record' };

const STEP: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('append' as const),
      writer: fc.integer({ min: 0, max: 2 }),
      records: fc.integer({ min: 0, max: 1000 }),
      // Mostly forward, sometimes a clock behind the table's.
      clock: fc.integer({ min: -5_000, max: 20_000 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('expire' as const),
      age: fc.integer({ min: 0, max: 100_000 }),
      retainLast: fc.integer({ min: 0, max: 4 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('schema' as const), wide: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('property' as const), value: fc.string({ maxLength: 5 }) }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('record' as const) }) },
);

describe('random sequences of changes', () => {
  it('keep the invariants after every step', () => {
    fc.assert(
      fc.property(fc.array(STEP, { maxLength: 60 }), fc.integer({ min: 1, max: 6 }), (steps, maxLog) => {
        let m = table({ [PREVIOUS_VERSIONS_MAX_PROPERTY]: String(maxLog) });
        let now = T0;
        let commits = 0;
        let totalRecords = 0;
        /** Every snapshot appended, in order, and those expired. */
        const appended: SnapshotId[] = [];
        const expired = new Set<SnapshotId>();
        const lastCommitOf = new Map<string, string>();
        let version = 1;
        for (const step of steps) {
          const before = m;
          if (step.kind === 'append') {
            now += step.clock;
            const writer = `p.w${step.writer}`;
            const commitId = `c${++commits}`;
            m = append(m, commitId, now, step.records, writer);
            appended.push(m['current-snapshot-id']!);
            lastCommitOf.set(writer, commitId);
            totalRecords += step.records;
          } else if (step.kind === 'expire') {
            const r = expireSnapshots(m, {
              olderThanMs: now - step.age,
              retainLast: step.retainLast,
              nowMs: now,
            });
            for (const id of r.expired) expired.add(id);
            expect(r.manifestLists).toHaveLength(r.expired.length);
            m = r.metadata;
          } else if (step.kind === 'schema') {
            m = setSchema(m, step.wide ? WIDER : SCHEMA, { lastColumnId: step.wide ? 4 : 2, nowMs: now });
          } else if (step.kind === 'property') {
            m = setProperties(m, { note: step.value }, { nowMs: now });
          } else {
            m = recordPreviousMetadata(m, {
              'metadata-file': `v${version++}`,
              'timestamp-ms': before['last-updated-ms'],
            }).metadata;
          }

          // Time never goes back.
          expect(m['last-updated-ms']).toBeGreaterThanOrEqual(before['last-updated-ms']);
          // Sequence numbers grow along the list; the last one is the table's.
          const seqs = m.snapshots.map((s) => s['sequence-number']);
          for (let i = 1; i < seqs.length; i++) expect(seqs[i]!).toBeGreaterThan(seqs[i - 1]!);
          expect(m['last-sequence-number']).toBe(appended.length);
          // What is kept is the newest part of the chain, each snapshot's parent its predecessor.
          const kept = m.snapshots.map((s) => s['snapshot-id']);
          expect(kept).toEqual(appended.filter((id) => !expired.has(id)));
          expect(kept).toEqual(appended.slice(appended.length - kept.length));
          for (const s of m.snapshots) {
            const i = appended.indexOf(s['snapshot-id']);
            expect(s['parent-snapshot-id']).toBe(i === 0 ? undefined : appended[i - 1]);
            expect(s['sequence-number']).toBe(i + 1);
          }
          // The current snapshot is never expired and main names it.
          if (appended.length > 0) {
            expect(m['current-snapshot-id']).toBe(appended.at(-1));
            expect(expired.has(appended.at(-1)!)).toBe(false);
            expect(m.refs?.main?.['snapshot-id']).toBe(appended.at(-1));
            expect(currentSnapshot(m)?.summary['total-records']).toBe(String(totalRecords));
          } else {
            expect(m['current-snapshot-id']).toBe(NO_SNAPSHOT);
          }
          // The snapshot log names kept snapshots only, in time order.
          const log = m['snapshot-log'];
          for (const e of log) expect(kept).toContain(e['snapshot-id']);
          for (let i = 1; i < log.length; i++)
            expect(log[i]!['timestamp-ms']).toBeGreaterThanOrEqual(log[i - 1]!['timestamp-ms']);
          // The metadata log is capped.
          expect(m['metadata-log'].length).toBeLessThanOrEqual(maxLog);
          // Every writer's last commit is found, whatever expired.
          for (const [writer, commitId] of lastCommitOf) expect(hasCommit(m, writer, commitId)).toBe(true);
          for (const s of m.snapshots)
            expect(hasCommit(m, 'nobody', s.summary[COMMIT_ID_SUMMARY_KEY]!)).toBe(true);
          // last-column-id never decreases and covers every schema.
          expect(m['last-column-id']).toBeGreaterThanOrEqual(before['last-column-id']);
          // The JSON file says the same.
          expect(parseTableMetadata(serializeTableMetadata(m), 'x')).toEqual(m);
        }
      }),
      { numRuns: 150 },
    );
  });
});
