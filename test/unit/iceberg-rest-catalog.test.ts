/**
 * The REST catalog's requests, without a server (the server side is
 * test/integration/iceberg-rest-catalog.test.ts): the requirements and updates of a commit
 * (shared/iceberg/rest-updates.ts) and the authentication of every request
 * (shared/iceberg/rest-catalog.ts).
 *
 * The update list is checked by replaying it: a property-based run of random commits (appends by
 * several writers, schema changes, property sets and removals, expiries) derives each commit's
 * updates from base and updated metadata, applies them to the base as the REST spec says a server
 * does, and must arrive at the updated metadata in everything a server keeps from updates. A
 * difference no update expresses is refused. SigV4: each request carries a signature of the
 * configured service and region over the body's SHA-256; a bearer token goes as `Authorization`
 * and never into a message.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  appendSnapshot,
  expireSnapshots,
  newSnapshotId,
  newTableMetadata,
  setProperties,
  setSchema,
} from '../../shared/iceberg/metadata.js';
import { parseJson, stringifyJson } from '../../shared/iceberg/metadata-json.js';
import { RestCatalog, regionOfUri } from '../../shared/iceberg/rest-catalog.js';
import { type RestUpdate, restCommitOf } from '../../shared/iceberg/rest-updates.js';
import type { IcebergSchema, IcebergTableMetadata } from '../../shared/iceberg/spec.js';
import { redact } from '../../shared/observability/redact.js';

const T0 = 1_765_000_000_000;
const SCHEMA: Omit<IcebergSchema, 'schema-id'> = {
  type: 'struct',
  'identifier-field-ids': [1],
  fields: [
    { id: 1, name: 'id', required: true, type: 'long' },
    { id: 2, name: 'name', required: false, type: 'string' },
  ],
};

function table(): IcebergTableMetadata {
  return newTableMetadata({
    location: 's3://lake/t',
    schema: SCHEMA,
    lastColumnId: 2,
    properties: { keep: 'k' },
    uuid: '5e1b0c1e-0000-4000-8000-000000000001',
    nowMs: T0,
  });
}

function append(base: IcebergTableMetadata, writer: string, n: number, nowMs: number): IcebergTableMetadata {
  return appendSnapshot(base, {
    snapshotId: newSnapshotId(base),
    manifestListPath: `s3://lake/t/metadata/snap-${n}.avro`,
    added: { dataFiles: 1, records: n, filesSize: 100 },
    commit: { writerId: writer, commitId: `c${n}` },
    nowMs,
  });
}

/** What a REST server does with the updates (the spec's TableUpdate semantics), on the fields they touch. */
function replay(base: IcebergTableMetadata, updates: readonly RestUpdate[]): IcebergTableMetadata {
  let m: Record<string, unknown> & IcebergTableMetadata = { ...base };
  let lastAdded: number | undefined;
  for (const u of updates) {
    switch (u.action) {
      case 'add-schema':
        m = { ...m, schemas: [...m.schemas, u.schema], 'last-column-id': u['last-column-id'] };
        lastAdded = u.schema['schema-id'];
        break;
      case 'set-current-schema':
        m = { ...m, 'current-schema-id': u['schema-id'] === -1 ? lastAdded! : u['schema-id'] };
        break;
      case 'add-snapshot':
        m = { ...m, snapshots: [...m.snapshots, u.snapshot] };
        break;
      case 'remove-snapshots':
        m = { ...m, snapshots: m.snapshots.filter((s) => !u['snapshot-ids'].includes(s['snapshot-id'])) };
        break;
      case 'set-snapshot-ref': {
        const { action: _a, 'ref-name': name, ...ref } = u;
        m = { ...m, refs: { ...m.refs, [name]: ref } };
        if (name === 'main') m = { ...m, 'current-snapshot-id': ref['snapshot-id'] };
        break;
      }
      case 'remove-snapshot-ref': {
        const refs = { ...m.refs };
        delete refs[u['ref-name']];
        m = { ...m, refs };
        break;
      }
      case 'set-properties':
        m = { ...m, properties: { ...m.properties, ...u.updates } };
        break;
      case 'remove-properties': {
        const properties = { ...m.properties };
        for (const k of u.removals) delete properties[k];
        m = { ...m, properties };
        break;
      }
    }
  }
  return m;
}

/** The fields a server keeps from the updates (the logs and stamps are its own). */
function kept(m: IcebergTableMetadata) {
  const sortedProps = Object.fromEntries(Object.entries(m.properties).sort(([a], [b]) => (a < b ? -1 : 1)));
  return stringifyJson({
    schemas: m.schemas,
    'current-schema-id': m['current-schema-id'],
    'last-column-id': m['last-column-id'],
    snapshots: m.snapshots,
    refs: m.refs,
    'current-snapshot-id': m['current-snapshot-id'],
    properties: sortedProps,
  });
}

describe('restCommitOf: the requirements and updates of a commit', () => {
  it("asserts the table's uuid and main's snapshot, and sends an append as snapshot, ref and properties", () => {
    const base = table();
    const first = append(base, 'w', 1, T0 + 1);
    const c1 = restCommitOf('ns.t', base, first);
    expect(c1.requirements).toEqual([
      { type: 'assert-table-uuid', uuid: base['table-uuid'] },
      { type: 'assert-ref-snapshot-id', ref: 'main', 'snapshot-id': null },
    ]);
    expect(c1.updates.map((u) => u.action)).toEqual(['add-snapshot', 'set-snapshot-ref', 'set-properties']);
    const second = append(first, 'w', 2, T0 + 2);
    const c2 = restCommitOf('ns.t', first, second);
    expect(c2.requirements[1]).toEqual({
      type: 'assert-ref-snapshot-id',
      ref: 'main',
      'snapshot-id': first['current-snapshot-id'],
    });
    // 63-bit ids travel exactly.
    expect(parseJson(stringifyJson(c2))).toMatchObject({
      updates: [{ snapshot: { 'snapshot-id': second['current-snapshot-id'] } }, {}, {}],
    });
  });

  it('adds a schema as add-schema + set-current-schema -1, asserting the current schema and last field id', () => {
    const base = table();
    const wider = setSchema(
      base,
      { ...SCHEMA, fields: [...SCHEMA.fields, { id: 3, name: 'n', required: false, type: 'int' }] },
      { lastColumnId: 3, nowMs: T0 + 1 },
    );
    const c = restCommitOf('ns.t', base, wider);
    expect(c.updates).toEqual([
      { action: 'add-schema', schema: wider.schemas[1], 'last-column-id': 3 },
      { action: 'set-current-schema', 'schema-id': -1 },
    ]);
    expect(c.requirements).toContainEqual({ type: 'assert-current-schema-id', 'current-schema-id': 0 });
    expect(c.requirements).toContainEqual({
      type: 'assert-last-assigned-field-id',
      'last-assigned-field-id': 2,
    });
    // Back to schema 0: no new schema, its id.
    const back = restCommitOf('ns.t', wider, setSchema(wider, SCHEMA, { lastColumnId: 3, nowMs: T0 + 2 }));
    expect(back.updates).toEqual([{ action: 'set-current-schema', 'schema-id': 0 }]);
  });

  it('refuses a difference no update expresses, as a bug', () => {
    const base = table();
    for (const updated of [
      { ...base, location: 's3://lake/elsewhere' },
      {
        ...base,
        'partition-specs': [
          { 'spec-id': 0, fields: [{ 'source-id': 1, 'field-id': 1000, name: 'b', transform: 'bucket[4]' }] },
        ],
      },
      { ...base, 'table-uuid': '5e1b0c1e-0000-4000-8000-000000000002' },
      { ...base, schemas: [{ ...base.schemas[0]!, fields: [] }] },
      { ...base, 'last-column-id': 9 },
    ]) {
      expect(() => restCommitOf('ns.t', base, updated)).toThrow(
        expect.objectContaining({ code: 'ICEBERG_METADATA_INVALID' }),
      );
    }
  });

  type Step =
    | { kind: 'append'; writer: number; records: number; clock: number }
    | { kind: 'schema'; add: boolean }
    | { kind: 'props'; set: Record<string, string>; remove: string[] }
    | { kind: 'expire'; retainLast: number };
  const KEYS = ['keep', 'a', 'b', 'c'];
  const STEP: fc.Arbitrary<Step> = fc.oneof(
    fc.record({
      kind: fc.constant('append' as const),
      writer: fc.integer({ min: 0, max: 2 }),
      records: fc.integer({ min: 0, max: 1000 }),
      clock: fc.integer({ min: 0, max: 10_000 }),
    }),
    fc.record({ kind: fc.constant('schema' as const), add: fc.boolean() }),
    fc.record({
      kind: fc.constant('props' as const),
      set: fc.dictionary(fc.constantFrom(...KEYS), fc.string({ maxLength: 3 }), { maxKeys: 3 }),
      remove: fc.subarray(KEYS),
    }),
    fc.record({ kind: fc.constant('expire' as const), retainLast: fc.integer({ min: 1, max: 3 }) }),
  );

  it('replays to the updated metadata: every commit of a random history (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(STEP, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 12 }),
        (commits) => {
          let base = table();
          let now = T0;
          let n = 0;
          let columns = 2;
          for (const steps of commits) {
            let updated = base;
            for (const step of steps) {
              now += 1_000;
              if (step.kind === 'append') updated = append(updated, `w${step.writer}`, ++n, now + step.clock);
              else if (step.kind === 'schema') {
                if (step.add) columns++;
                const fields = [
                  ...SCHEMA.fields,
                  ...Array.from({ length: columns - 2 }, (_, i) => ({
                    id: i + 3,
                    name: `c${i + 3}`,
                    required: false,
                    type: 'int' as const,
                  })),
                ];
                updated = setSchema(
                  updated,
                  { ...SCHEMA, fields: step.add ? fields : SCHEMA.fields },
                  { lastColumnId: columns, nowMs: now },
                );
              } else if (step.kind === 'props')
                updated = setProperties(updated, step.set, {
                  remove: step.remove.filter((k) => !(k in step.set)),
                  nowMs: now,
                });
              else
                updated = expireSnapshots(updated, {
                  olderThanMs: now,
                  retainLast: step.retainLast,
                  nowMs: now,
                }).metadata;
            }
            const commit = restCommitOf('ns.t', base, updated);
            expect(kept(replay(base, commit.updates))).toBe(kept(updated));
            expect(commit.requirements.slice(0, 2)).toEqual([
              { type: 'assert-table-uuid', uuid: base['table-uuid'] },
              {
                type: 'assert-ref-snapshot-id',
                ref: 'main',
                'snapshot-id': base.refs?.main?.['snapshot-id'] ?? null,
              },
            ]);
            base = updated;
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('RestCatalog requests: SigV4 and the bearer token', () => {
  /** A fetch that records each request and answers the config, then 404 for tables. */
  function recorder() {
    const requests: { url: string; method: string; headers: Record<string, string>; body: string }[] = [];
    const fetchStub: typeof fetch = async (input, init) => {
      const headers = Object.fromEntries(
        Object.entries((init?.headers ?? {}) as Record<string, string>).map(([k, v]) => [k.toLowerCase(), v]),
      );
      requests.push({
        url: String(input),
        method: init?.method ?? 'GET',
        headers,
        body: String(init?.body ?? ''),
      });
      const url = new URL(String(input));
      if (url.pathname === '/iceberg/v1/config')
        return Response.json({
          defaults: {},
          overrides: { prefix: 'arn%3Aaws%3As3tables%3Aus-east-1%3A111122223333%3Abucket%2Flake' },
        });
      if (init?.method === 'POST')
        return Response.json(
          { error: { message: 'denied', type: 'ForbiddenException', code: 403 } },
          { status: 403 },
        );
      return Response.json(
        { error: { message: 'no such table', type: 'NoSuchTableException', code: 404 } },
        { status: 404 },
      );
    };
    return { requests, fetchStub };
  }

  it('signs every request for the service and region, over the SHA-256 of its body', async () => {
    const { requests, fetchStub } = recorder();
    const catalog = new RestCatalog({
      uri: 'https://s3tables.us-east-1.amazonaws.com/iceberg',
      warehouse: 'arn:aws:s3tables:us-east-1:111122223333:bucket/lake',
      sigv4: { service: 's3tables' },
      credentials: {
        accessKeyId: 'AKIDEXAMPLE',
        secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
      },
      fetch: fetchStub,
    });
    expect(await catalog.loadTable({ namespace: 'ns', name: 't' })).toBeUndefined();
    const denied = await catalog
      .createTable({ namespace: 'ns', name: 't' }, table())
      .catch((e: unknown) => e);
    expect(denied).toMatchObject({ code: 'REST_CATALOG_ACCESS_DENIED' });
    expect((denied as Error).message).toContain('s3tables');
    expect(requests.map((r) => `${r.method} ${new URL(r.url).pathname}`)).toEqual([
      'GET /iceberg/v1/config',
      'GET /iceberg/v1/arn%3Aaws%3As3tables%3Aus-east-1%3A111122223333%3Abucket%2Flake/namespaces/ns/tables/t',
      'POST /iceberg/v1/arn%3Aaws%3As3tables%3Aus-east-1%3A111122223333%3Abucket%2Flake/namespaces/ns/tables',
    ]);
    expect(new URL(requests[0]!.url).searchParams.get('warehouse')).toBe(
      'arn:aws:s3tables:us-east-1:111122223333:bucket/lake',
    );
    for (const r of requests) {
      expect(r.headers.authorization).toMatch(
        /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/us-east-1\/s3tables\/aws4_request, SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*x-amz-content-sha256[a-z0-9;-]*x-amz-date[a-z0-9;-]*, Signature=[0-9a-f]{64}$/,
      );
      expect(r.headers['x-amz-content-sha256']).toBe(createHash('sha256').update(r.body).digest('hex'));
      expect(r.headers['x-amz-date']).toMatch(/^\d{8}T\d{6}Z$/);
    }
    expect(JSON.parse(requests[2]!.body)).toMatchObject({
      name: 't',
      location: 's3://lake/t',
      'stage-create': false,
    });
  });

  it('takes the region from the endpoint, and refuses SigV4 without one', () => {
    expect(regionOfUri('https://glue.eu-west-3.amazonaws.com/iceberg')).toBe('eu-west-3');
    expect(regionOfUri('https://s3tables.us-gov-west-1.amazonaws.com/iceberg')).toBe('us-gov-west-1');
    expect(regionOfUri('http://127.0.0.1:8181')).toBeUndefined();
    const saved = [process.env.AWS_REGION, process.env.AWS_DEFAULT_REGION];
    delete process.env.AWS_REGION;
    delete process.env.AWS_DEFAULT_REGION;
    try {
      expect(() => new RestCatalog({ uri: 'http://127.0.0.1:8181', sigv4: { service: 'glue' } })).toThrow(
        expect.objectContaining({
          code: 'REST_CATALOG_FAILED',
          message: expect.stringContaining('lake.catalog.sigv4.region'),
        }),
      );
    } finally {
      if (saved[0] !== undefined) process.env.AWS_REGION = saved[0];
      if (saved[1] !== undefined) process.env.AWS_DEFAULT_REGION = saved[1];
    }
  });

  it('sends a bearer token, never shows it in a message, and registers it with the redactor', async () => {
    const { requests, fetchStub } = recorder();
    const token = 'sk-live-0123456789abcdef';
    const catalog = new RestCatalog({ uri: 'https://catalog.example/iceberg', token, fetch: fetchStub });
    const denied = await catalog
      .createTable({ namespace: 'ns', name: 't' }, table())
      .catch((e: unknown) => e);
    expect(denied).toMatchObject({ code: 'REST_CATALOG_ACCESS_DENIED' });
    expect((denied as Error).message).toContain('lake.catalog.token');
    expect((denied as Error).message).not.toContain(token);
    expect(requests.every((r) => r.headers.authorization === `Bearer ${token}`)).toBe(true);
    expect(redact(`a driver said: ${token}`)).not.toContain(token);
  });

  it('reads a commit reply: 409 conflict, 5xx or no reply unknown, 400 refused', async () => {
    const base = table();
    const loaded = {
      metadata: base,
      metadataLocation: 's3://lake/t/metadata/00000-a.metadata.json',
      version: 'x',
    };
    const updated = append(base, 'w', 1, T0 + 1);
    const outcome = async (answer: () => Response) => {
      const fetchStub: typeof fetch = async (input) =>
        new URL(String(input)).pathname === '/v1/config'
          ? Response.json({ defaults: {}, overrides: {} })
          : answer();
      const catalog = new RestCatalog({ uri: 'http://catalog.test', fetch: fetchStub });
      return catalog.commitTable({ namespace: 'ns', name: 't' }, loaded, updated).catch((e: unknown) => e);
    };
    const error = (status: number, type: string) =>
      Response.json({ error: { message: 'm', type, code: status } }, { status });
    expect(await outcome(() => error(409, 'CommitFailedException'))).toEqual({ status: 'conflict' });
    for (const status of [500, 502, 503, 504]) {
      expect(await outcome(() => error(status, 'ServiceUnavailableException'))).toMatchObject({
        status: 'unknown',
      });
    }
    expect(
      await outcome(() => {
        throw new TypeError('fetch failed');
      }),
    ).toMatchObject({ status: 'unknown' });
    expect(await outcome(() => error(400, 'BadRequestException'))).toMatchObject({
      code: 'REST_CATALOG_FAILED',
    });
    expect(await outcome(() => error(403, 'ForbiddenException'))).toMatchObject({
      code: 'REST_CATALOG_ACCESS_DENIED',
    });
  });
});
