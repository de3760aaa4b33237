/**
 * The composition root: turns a validated spec into the parts a run needs — the state store
 * (DynamoDB or a local directory), the lake sink (S3 or a local directory) and the sources (from
 * the driver registry, one per source and per-table read settings, opened lazily).
 *
 * Each part also opens on its own (`openStateStore`, `openLake`, `openSources`) for `tidemark
 * check` (check.ts), which judges them one by one and must not create the state table.
 *
 * Owns wiring only. Never holds sync logic; the engine does.
 */
import { resolveSourceUrl } from '../config/secrets.js';
import {
  historyTarget,
  type IncrementalTableSpec,
  lakeTargets,
  type Spec,
  tableTarget,
} from '../config/spec.js';
import type { ClosableIncrementalSource } from '../contracts/driver.js';
import { TidemarkError } from '../contracts/errors.js';
import type { Sink, SinkProbe } from '../contracts/sink.js';
import type { Clock, CursorStore, CursorStoreProbe } from '../contracts/state.js';
import type { Batch } from '../dataplane/batch.js';
import { newBatch } from '../dataplane/batch.js';
import { encodeRows } from '../dataplane/encoder.js';
import { driver } from '../drivers/registry.js';
import type { RowEncoder } from '../engine/incremental/options.js';
import { MAX_SNAPSHOT_AGE_PROPERTY, MIN_SNAPSHOTS_TO_KEEP_PROPERTY } from '../iceberg/expire.js';
import { openLakeCatalog } from '../iceberg/open-catalog.js';
import type { Logger } from '../observability/log.js';
import { LakeSink } from '../sink/lake-sink.js';
import { type LakeSinkOptions, openLakeSink, openLakeStore, openLocation } from '../sink/open-lake.js';
import { FileCursorStore } from '../state/file-cursor-store.js';

export interface OpenPipeline {
  readonly store: CursorStore;
  readonly sink: Sink;
  /** The source for a table (cached per source name and read settings). */
  source(name: string, table: IncrementalTableSpec): Promise<ClosableIncrementalSource>;
  /** Encoder for sources that only have the row path. */
  readonly encodeRows: RowEncoder;
  close(): Promise<void>;
}

export interface OpenPipelineOptions {
  readonly clock?: Clock;
  /** Do not resolve any source (status/reset only need state). */
  readonly sourcesLazy?: boolean;
  /** Where the lake sink's warnings go (structured in Lambda/Fargate); default process warnings. */
  readonly logger?: Logger;
}

/** The row-path encoder the engine uses when a source has no columnar path. */
export const rowEncoder: RowEncoder = (schema, rows, meta): Batch =>
  newBatch({
    table: meta.table,
    record: encodeRows(schema, rows, {
      posPrefix: meta.posPrefix,
      ordinalBase: meta.ordinalBase,
      op: 1,
      phase: 'incremental',
      ingestTsNanos: BigInt(Date.now()) * 1_000_000n,
      snapshot: false,
    }),
    watermark: undefined,
    writeMode: meta.writeMode,
  });

/** The per-table settings a source is opened with (an incremental table's, or a check's own). */
export type SourceReadSettings = Pick<IncrementalTableSpec, 'lagSeconds' | 'lagOnly' | 'cursorTimeZone'>;

/** The sources of a spec: one per source name and per-table read settings, opened lazily. */
export interface OpenSources {
  /** The source for a table (cached per source name and read settings). */
  source(name: string, table: SourceReadSettings): Promise<ClosableIncrementalSource>;
  close(): Promise<void>;
}

/**
 * The state store of a spec. `ensureTable` (default true): with a DynamoDB `endpoint`
 * (LocalStack, dynalite) nobody ran the CDK app, so the table is created; `tidemark check` passes
 * false, as it never changes anything but its own probe.
 */
export async function openStateStore(
  spec: Spec,
  opts: { readonly clock?: Clock; readonly ensureTable?: boolean } = {},
): Promise<CursorStore & CursorStoreProbe> {
  const clock = opts.clock ?? Date.now;
  if (spec.state.dynamodb) {
    const d = spec.state.dynamodb;
    // Loaded only for a DynamoDB state: the SDK client costs a local run's start-up ~20 ms.
    const [{ DynamoDBClient }, { DynamoCursorStore }] = await Promise.all([
      import('@aws-sdk/client-dynamodb'),
      import('../state/dynamo-cursor-store.js'),
    ]);
    const dynamo = new DynamoCursorStore({
      client: new DynamoDBClient({
        ...(d.region ? { region: d.region } : {}),
        ...(d.endpoint ? { endpoint: d.endpoint } : {}),
      }),
      tableName: d.table,
      clock,
      ...(d.endpoint ? { endpoint: d.endpoint } : {}),
    });
    if (d.endpoint && (opts.ensureTable ?? true)) await dynamo.ensureTable();
    return dynamo;
  }
  return new FileCursorStore(spec.state.dir!, clock);
}

/**
 * The lake sink of a spec (S3 or a local directory): plain tables' objects, and Iceberg tables'
 * data files committed through `lake.catalog`. Opens no connection.
 */
export function openLake(spec: Spec, logger?: Logger): Sink & SinkProbe {
  const options = lakeStoreOptions(spec);
  const lake = openLakeStore(options);
  const retention = spec.lake.snapshotRetention;
  return new LakeSink({
    ...(logger
      ? { warn: (message: string, fields: Readonly<Record<string, unknown>>) => logger.warn(message, fields) }
      : {}),
    parquet: openLakeSink(options, lake),
    tableProperties: {
      [MAX_SNAPSHOT_AGE_PROPERTY]: String(Math.round(retention.maxAgeHours * 3_600_000)),
      [MIN_SNAPSHOTS_TO_KEEP_PROPERTY]: String(retention.minSnapshots),
    },
    catalog: openLakeCatalog(spec.lake.catalog, {
      store: lake.store,
      prefix: lake.prefix,
      targets: spec.tables.flatMap(lakeTargets),
      openFolder: (location) => openLocation(location, options),
    }),
    partitionBy: Object.fromEntries(
      spec.tables.flatMap((t) => (t.partitionBy?.length ? [[tableTarget(t), t.partitionBy]] : [])),
    ),
    history: Object.fromEntries(
      spec.tables.flatMap((t) => (historyTarget(t) ? [[tableTarget(t), historyTarget(t)!]] : [])),
    ),
  });
}

/**
 * How a spec's lake store is opened (shared/sink/open-lake.ts): the run's sink and `tidemark
 * check`'s probes of the store alone (its catalog apart) open it alike.
 */
export function lakeStoreOptions(spec: Spec): LakeSinkOptions {
  return {
    uri: spec.lake.uri,
    compression: spec.lake.compression,
    ...(spec.lake.region ? { region: spec.lake.region } : {}),
    ...(spec.lake.endpoint ? { endpoint: spec.lake.endpoint } : {}),
    ...(spec.lake.forcePathStyle !== undefined ? { forcePathStyle: spec.lake.forcePathStyle } : {}),
  };
}

/** The sources of a spec, from the driver registry; nothing connects until first use. */
export function openSources(spec: Spec, clock: Clock = Date.now): OpenSources {
  const sources = new Map<string, Promise<ClosableIncrementalSource>>();
  return {
    source(name, table) {
      const s = spec.sources[name];
      if (!s) throw new Error(`unknown source "${name}"`);
      const lagMs = Math.round(table.lagSeconds * 1000);
      const key = `${name}\0${lagMs}\0${table.lagOnly}\0${table.cursorTimeZone ?? ''}`;
      let p = sources.get(key);
      if (!p) {
        const reg = driver(s.kind);
        // The spec gate (shared/config/modes.ts) refuses this already; a hand-built spec may not.
        if (!reg.openIncremental)
          throw new TidemarkError(
            'SOURCE_NOT_INCREMENTAL',
            `sources.${name}: the ${s.kind} driver has no incremental read`,
          );
        const open = reg.openIncremental.bind(reg);
        p = (async () =>
          open({
            url: await resolveSourceUrl(s, { name }),
            sourceName: `sources.${name}`,
            connectTimeoutMs: s.connectTimeoutSeconds * 1000,
            lagMs,
            lagOnly: table.lagOnly,
            ...(table.cursorTimeZone ? { cursorTimeZone: table.cursorTimeZone } : {}),
            clock,
          }))();
        sources.set(key, p);
        p.catch(() => sources.delete(key));
      }
      return p;
    },
    async close() {
      const all = [...sources.values()];
      sources.clear();
      await Promise.all(all.map(async (p) => (await p.catch(() => undefined))?.close()));
    },
  };
}

export async function openPipeline(spec: Spec, opts: OpenPipelineOptions = {}): Promise<OpenPipeline> {
  const clock = opts.clock ?? Date.now;
  const store = await openStateStore(spec, { clock });
  const sink = openLake(spec, opts.logger);
  const sources = openSources(spec, clock);
  return {
    store,
    sink,
    encodeRows: rowEncoder,
    source: (name, table) => sources.source(name, table),
    close: () => sources.close(),
  };
}
