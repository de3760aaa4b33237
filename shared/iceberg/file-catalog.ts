/**
 * The `file` catalog: no server, the table's folder is the catalog. Its metadata lives under
 * `<table>/metadata/` as `v<N>.metadata.json` (N = 1, 2, ...) plus `version-hint.text`, the layout
 * of Iceberg's Hadoop catalog, which Spark's Hadoop catalog and `load(<table folder>)`, pyiceberg's
 * `StaticTable.from_metadata(<table folder>)` and DuckDB's `iceberg_scan(<table folder>)` read.
 *
 * Owns: that layout on an `ObjectStore` (a local folder or an S3 bucket). The compare-and-swap is
 * the conditional creation of `v<N+1>.metadata.json` (`putIfAbsent`: link(2) of a fsynced temp file
 * on a folder, `If-None-Match: *` on S3): exactly one writer creates each version, the others get
 * `conflict`. `version-hint.text` holds the current N as bare digits without a newline (Iceberg
 * Java writes it so; pyiceberg and DuckDB paste it into the file name as it is) and is written
 * after the commit, best effort: `loadTable` reads the hint and then probes `v<N+1>`, `v<N+2>`,
 * ... until one is absent (falling back to listing `v*.metadata.json` when the hint is missing or
 * names no file), so a stale or lost hint costs readers that trust it one commit of freshness, never
 * a commit. After writing the hint a writer probes the next version once and rewrites the hint if a
 * faster writer's commit was overwritten by its older hint.
 *
 * Never deletes metadata files and never writes `v<N>.gz.metadata.json`: a foreign writer that
 * commits to the same folder must write uncompressed metadata (a gzip version would escape the
 * probe). The store must enforce the condition: s3rver and some S3 compatibles overwrite instead,
 * which would let two commits take one version; the catalog probes the store once (see
 * `conditionalWrites`) and refuses such a store before its first write.
 */
import { randomBytes } from 'node:crypto';
import { SinkError } from '../contracts/errors.js';
import { type ObjectStore, supportsConditionalWrites } from '../sink/object-store.js';
import type { Catalog, CommitOutcome, CreateOutcome, LoadedTable, TableIdent } from './catalog.js';
import { identText } from './catalog.js';
import { parseTableMetadata, serializeTableMetadata } from './metadata-json.js';
import type { IcebergTableMetadata } from './spec.js';

/** The hint's file name in the metadata folder (Iceberg's `Util.VERSION_HINT_FILENAME`). */
export const VERSION_HINT_FILE = 'version-hint.text';
const METADATA_FOLDER = 'metadata';
const VERSION_FILE = /^v(\d+)\.metadata\.json$/;
/** Codes of store errors after which a commit certainly did not happen: rethrown, not `unknown`. */
const DEFINITE_FAILURES = new Set([
  'SINK_ACCESS_DENIED',
  'SINK_CREDENTIALS',
  'SINK_REGION_MISSING',
  'SINK_WRONG_REGION',
  'SINK_BUCKET_MISSING',
  'SINK_WRONG_SERVICE',
  'SINK_DIR_UNWRITABLE',
  'SINK_DISK_FULL',
  'ICEBERG_CONDITIONAL_WRITES_UNSUPPORTED',
]);
/** Times a writer rewrites a hint that a slower writer set back. */
const HINT_REPAIRS = 3;

export interface FileCatalogOptions {
  readonly store: ObjectStore;
  /** The table's folder as a key of `store`, e.g. `lake/public.orders` (no trailing `/`). */
  readonly tableKey: (ident: TableIdent) => string;
  /**
   * `verify` (default): before its first write the catalog checks once that the store refuses a
   * second conditional create (`supportsConditionalWrites`, a throw-away object in the table's
   * metadata folder). `trusted`: skip that (a store known to keep it, e.g. a `FileObjectStore`
   * already checked by `tidemark check`).
   */
  readonly conditionalWrites?: 'verify' | 'trusted';
}

/** The `file` catalog over one object store. */
export class FileCatalog implements Catalog {
  readonly kind = 'file';
  /** A commit creates `v<N>.metadata.json` durably in the metadata folder (`putIfAbsent` syncs it). */
  readonly commitSyncsMetadataFolder = true;
  private readonly store: ObjectStore;
  private readonly tableKey: (ident: TableIdent) => string;
  /** Settled once per catalog: the probe's result (a rejected promise is retried next time). */
  private verified: Promise<void> | undefined;

  constructor(options: FileCatalogOptions) {
    this.store = options.store;
    this.tableKey = (ident) => options.tableKey(ident).replace(/\/+$/, '');
    if (options.conditionalWrites === 'trusted') this.verified = Promise.resolve();
  }

  /** The table's location as its metadata records it: the folder's URI. */
  location(ident: TableIdent): string {
    return this.store.uri(this.tableKey(ident));
  }

  /** The key of `v<version>.metadata.json` of the table. */
  metadataKey(ident: TableIdent, version: number): string {
    return `${this.tableKey(ident)}/${METADATA_FOLDER}/v${version}.metadata.json`;
  }

  async loadTable(ident: TableIdent): Promise<LoadedTable | undefined> {
    const found = await this.latest(ident);
    if (found === undefined) return undefined;
    const location = this.store.uri(this.metadataKey(ident, found.version));
    return {
      metadata: parseTableMetadata(new TextDecoder().decode(found.bytes), location),
      metadataLocation: location,
      version: String(found.version),
    };
  }

  async createTable(ident: TableIdent, metadata: IcebergTableMetadata): Promise<CreateOutcome> {
    await this.verifyConditionalWrites(ident);
    // v1 may have been cleaned away from a table at v7: look for any version, not only v1.
    if ((await this.latest(ident)) !== undefined) return { status: 'exists' };
    const created = await this.store.putIfAbsent(this.metadataKey(ident, 1), encode(metadata));
    if (created === 'exists') return { status: 'exists' };
    await this.writeHint(ident, 1);
    return { status: 'created', table: this.loaded(ident, metadata, 1) };
  }

  async commitTable(
    ident: TableIdent,
    base: LoadedTable,
    updated: IcebergTableMetadata,
  ): Promise<CommitOutcome> {
    const baseVersion = Number(base.version);
    if (!Number.isSafeInteger(baseVersion) || baseVersion < 1) {
      throw new SinkError(
        'ICEBERG_METADATA_INVALID',
        identText(ident),
        `the file catalog was given version ${JSON.stringify(base.version)} of ${identText(ident)}, which it never returns (a bug)`,
      );
    }
    await this.verifyConditionalWrites(ident);
    const next = baseVersion + 1;
    let result: 'created' | 'exists';
    try {
      result = await this.store.putIfAbsent(this.metadataKey(ident, next), encode(updated));
    } catch (e) {
      if (e instanceof SinkError && DEFINITE_FAILURES.has(e.code)) throw e;
      return { status: 'unknown', cause: e };
    }
    if (result === 'exists') return { status: 'conflict' };
    await this.writeHint(ident, next);
    return { status: 'committed', table: this.loaded(ident, updated, next) };
  }

  private loaded(ident: TableIdent, metadata: IcebergTableMetadata, version: number): LoadedTable {
    return {
      metadata,
      metadataLocation: this.store.uri(this.metadataKey(ident, version)),
      version: String(version),
    };
  }

  /** The newest version and its bytes: from the hint (or a listing), then probing upwards. */
  private async latest(ident: TableIdent): Promise<{ version: number; bytes: Uint8Array } | undefined> {
    let version = await this.readHint(ident);
    let bytes = version === undefined ? undefined : await this.store.get(this.metadataKey(ident, version));
    if (bytes === undefined) {
      version = await this.listedVersion(ident);
      if (version === undefined) return undefined;
      bytes = await this.store.get(this.metadataKey(ident, version));
      // Listed, then gone: only a concurrent clean-up does that; the probe below finds what follows.
      if (bytes === undefined) return undefined;
    }
    for (;;) {
      const next = await this.store.get(this.metadataKey(ident, version! + 1));
      if (next === undefined) return { version: version!, bytes };
      version = version! + 1;
      bytes = next;
    }
  }

  private async readHint(ident: TableIdent): Promise<number | undefined> {
    const bytes = await this.store.get(`${this.tableKey(ident)}/${METADATA_FOLDER}/${VERSION_HINT_FILE}`);
    if (bytes === undefined) return undefined;
    const text = new TextDecoder().decode(bytes).trim();
    const n = /^\d{1,15}$/.test(text) ? Number(text) : undefined;
    return n !== undefined && n >= 1 ? n : undefined;
  }

  private async listedVersion(ident: TableIdent): Promise<number | undefined> {
    const folder = `${this.tableKey(ident)}/${METADATA_FOLDER}/`;
    let max: number | undefined;
    for (const o of await this.store.list(`${folder}v`)) {
      const m = VERSION_FILE.exec(o.key.slice(folder.length));
      if (m && m[1]!.length <= 15) max = Math.max(max ?? 0, Number(m[1]));
    }
    return max;
  }

  /**
   * Writes the hint, best effort: a failure leaves an older hint, which `loadTable` corrects by
   * probing. Then checks once that no newer version exists; if one does, its writer's hint may
   * have been overwritten by ours, so the newest version is written instead.
   */
  private async writeHint(ident: TableIdent, version: number): Promise<void> {
    const key = `${this.tableKey(ident)}/${METADATA_FOLDER}/${VERSION_HINT_FILE}`;
    try {
      let written = version;
      // Best effort, so its folder entry need not be durable now (the next commit syncs the folder).
      await this.store.put(key, new TextEncoder().encode(String(written)), { syncFolder: false });
      for (let i = 0; i < HINT_REPAIRS; i++) {
        let newest = written;
        while ((await this.store.get(this.metadataKey(ident, newest + 1))) !== undefined) newest++;
        if (newest === written) return;
        written = newest;
        await this.store.put(key, new TextEncoder().encode(String(written)), { syncFolder: false });
      }
    } catch {
      // The commit stands; readers that trust the hint see it at the next commit.
    }
  }

  private verifyConditionalWrites(ident: TableIdent): Promise<void> {
    this.verified ??= (async () => {
      const key = `${this.tableKey(ident)}/${METADATA_FOLDER}/_tidemark-probe.${randomBytes(6).toString('hex')}`;
      if (!(await supportsConditionalWrites(this.store, key))) {
        throw new SinkError(
          'ICEBERG_CONDITIONAL_WRITES_UNSUPPORTED',
          identText(ident),
          `the lake store at ${this.store.uri(key.slice(0, key.lastIndexOf('/')))} ignores conditional writes (a second create-only PUT with If-None-Match: * replaced the object instead of failing with 412), so two commits could take the same metadata version; use AWS S3, MinIO or another store that enforces If-None-Match, or a catalog with its own commit (glue)`,
        );
      }
    })();
    const pending = this.verified;
    pending.catch(() => {
      if (this.verified === pending) this.verified = undefined;
    });
    return pending;
  }
}

function encode(metadata: IcebergTableMetadata): Uint8Array {
  return new TextEncoder().encode(serializeTableMetadata(metadata));
}
