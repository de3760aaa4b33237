/**
 * What a REST catalog commit sends (the Iceberg REST spec's `CommitTableRequest`): the
 * requirements the server checks against the table's current metadata, and the updates it then
 * applies, derived from the metadata a commit was built on (`base`) and the metadata it built
 * (`updated`). The `Catalog` seam hands a catalog the whole new metadata (./catalog.ts); a REST
 * server writes the metadata file itself, so the difference is what travels.
 *
 * Owns: that derivation, pure. Supported differences, each as the spec's update:
 * - schemas added (ids the base does not have): `add-schema`, with `last-column-id`; a changed
 *   `current-schema-id`: `set-current-schema` (-1, "the schema added last", when it is the one
 *   just added, since a server may give an added schema another id);
 * - snapshots added: `add-snapshot`, in `updated`'s order; snapshots gone: `remove-snapshots`
 *   (expiry);
 * - refs set or moved (`main` above all): `set-snapshot-ref`; refs gone: `remove-snapshot-ref`;
 * - properties set or changed: `set-properties` (only those keys); removed: `remove-properties`.
 * Left to the server, never sent: `metadata-log`, `snapshot-log`, `last-updated-ms`,
 * `last-sequence-number` (the server keeps them as it applies the updates). Any other difference
 * (location, partition specs, sort orders, format version, table uuid, a schema changed in place
 * or removed, `last-column-id` moved without a schema) is refused as a bug:
 * `ICEBERG_METADATA_INVALID`, nothing sent.
 *
 * Requirements, always: `assert-table-uuid` (a table dropped and created again is not ours) and
 * `assert-ref-snapshot-id` of `main` as the base had it (null for no snapshot): the compare-and-swap,
 * as Iceberg's own REST client sends for an append. Every other ref the commit moves is asserted
 * the same way; a schema change adds `assert-current-schema-id` and
 * `assert-last-assigned-field-id`. Never reads or writes anything.
 */
import { SinkError } from '../contracts/errors.js';
import { MAIN_BRANCH } from './metadata.js';
import { stringifyJson } from './metadata-json.js';
import type {
  IcebergSchema,
  IcebergSnapshot,
  IcebergSnapshotRef,
  IcebergTableMetadata,
  SnapshotId,
} from './spec.js';

/** One requirement of a commit (the spec's `TableRequirement`). */
export type RestRequirement =
  | { readonly type: 'assert-table-uuid'; readonly uuid: string }
  | {
      readonly type: 'assert-ref-snapshot-id';
      readonly ref: string;
      readonly 'snapshot-id': SnapshotId | null;
    }
  | { readonly type: 'assert-current-schema-id'; readonly 'current-schema-id': number }
  | { readonly type: 'assert-last-assigned-field-id'; readonly 'last-assigned-field-id': number };

/** One update of a commit (the spec's `TableUpdate`), the actions tidemark sends. */
export type RestUpdate =
  | { readonly action: 'add-schema'; readonly schema: IcebergSchema; readonly 'last-column-id': number }
  | { readonly action: 'set-current-schema'; readonly 'schema-id': number }
  | { readonly action: 'add-snapshot'; readonly snapshot: IcebergSnapshot }
  | { readonly action: 'remove-snapshots'; readonly 'snapshot-ids': readonly SnapshotId[] }
  | ({ readonly action: 'set-snapshot-ref'; readonly 'ref-name': string } & IcebergSnapshotRef)
  | { readonly action: 'remove-snapshot-ref'; readonly 'ref-name': string }
  | { readonly action: 'set-properties'; readonly updates: Readonly<Record<string, string>> }
  | { readonly action: 'remove-properties'; readonly removals: readonly string[] };

export interface RestCommit {
  readonly requirements: readonly RestRequirement[];
  readonly updates: readonly RestUpdate[];
}

/** Fields that must be equal in `base` and `updated`: no update of tidemark's changes them. */
const FIXED_FIELDS = [
  'format-version',
  'table-uuid',
  'location',
  'partition-specs',
  'default-spec-id',
  'last-partition-id',
  'sort-orders',
  'default-sort-order-id',
] as const;

/**
 * The requirements and updates that turn `base` into `updated` on a REST catalog.
 *
 * @param table the table's name, for messages.
 * @throws SinkError `ICEBERG_METADATA_INVALID` for a difference no supported update expresses.
 */
export function restCommitOf(
  table: string,
  base: IcebergTableMetadata,
  updated: IcebergTableMetadata,
): RestCommit {
  const refuse = (what: string): never => {
    throw new SinkError(
      'ICEBERG_METADATA_INVALID',
      table,
      `a commit to ${table} changes ${what}, which tidemark does not send to a REST catalog (a bug: only schemas added, snapshots added or expired, refs and properties are)`,
    );
  };
  for (const field of FIXED_FIELDS) {
    if (same(base[field], updated[field])) continue;
    refuse(`"${field}"`);
  }
  const requirements: RestRequirement[] = [
    { type: 'assert-table-uuid', uuid: base['table-uuid'] },
    { type: 'assert-ref-snapshot-id', ref: MAIN_BRANCH, 'snapshot-id': refSnapshot(base, MAIN_BRANCH) },
  ];
  const updates: RestUpdate[] = [];

  // Schemas: appended only; the current one may move.
  const baseSchemas = new Map(base.schemas.map((s) => [s['schema-id'], s]));
  const updatedIds = new Set(updated.schemas.map((s) => s['schema-id']));
  for (const s of base.schemas) {
    if (!updatedIds.has(s['schema-id'])) refuse(`schemas (schema ${s['schema-id']} removed)`);
  }
  let lastAdded: number | undefined;
  for (const s of updated.schemas) {
    const before = baseSchemas.get(s['schema-id']);
    if (before === undefined) {
      updates.push({ action: 'add-schema', schema: s, 'last-column-id': updated['last-column-id'] });
      lastAdded = s['schema-id'];
    } else if (!same(before, s)) {
      refuse(`schema ${s['schema-id']} in place`);
    }
  }
  if (lastAdded === undefined && updated['last-column-id'] !== base['last-column-id'])
    refuse('"last-column-id" without adding a schema');
  if (updated['current-schema-id'] !== base['current-schema-id']) {
    const id = updated['current-schema-id'];
    if (!updatedIds.has(id)) refuse(`"current-schema-id" to ${id}, a schema it does not have`);
    updates.push({ action: 'set-current-schema', 'schema-id': id === lastAdded ? -1 : id });
  }
  if (lastAdded !== undefined || updated['current-schema-id'] !== base['current-schema-id']) {
    requirements.push(
      { type: 'assert-current-schema-id', 'current-schema-id': base['current-schema-id'] },
      { type: 'assert-last-assigned-field-id', 'last-assigned-field-id': base['last-column-id'] },
    );
  }

  // Snapshots: added in order, expired ones removed.
  const baseSnapshots = new Map(base.snapshots.map((s) => [s['snapshot-id'], s]));
  const kept = new Set(updated.snapshots.map((s) => s['snapshot-id']));
  for (const s of updated.snapshots) {
    const before = baseSnapshots.get(s['snapshot-id']);
    if (before === undefined) updates.push({ action: 'add-snapshot', snapshot: s });
    else if (!same(before, s)) refuse(`snapshot ${s['snapshot-id']} in place`);
  }
  const removed = base.snapshots.map((s) => s['snapshot-id']).filter((id) => !kept.has(id));
  if (removed.length > 0) updates.push({ action: 'remove-snapshots', 'snapshot-ids': removed });

  // Refs: `current-snapshot-id` is main's, so a move of it without main's ref is refused.
  const baseRefs = base.refs ?? {};
  const updatedRefs = updated.refs ?? {};
  for (const [name, ref] of Object.entries(updatedRefs)) {
    const before = baseRefs[name];
    if (before !== undefined && same(before, ref)) continue;
    updates.push({ action: 'set-snapshot-ref', 'ref-name': name, ...ref });
    if (name !== MAIN_BRANCH) {
      requirements.push({
        type: 'assert-ref-snapshot-id',
        ref: name,
        'snapshot-id': refSnapshot(base, name),
      });
    }
  }
  for (const name of Object.keys(baseRefs)) {
    if (updatedRefs[name] === undefined) {
      updates.push({ action: 'remove-snapshot-ref', 'ref-name': name });
      if (name !== MAIN_BRANCH) {
        requirements.push({
          type: 'assert-ref-snapshot-id',
          ref: name,
          'snapshot-id': refSnapshot(base, name),
        });
      }
    }
  }
  const mainAfter = refSnapshot(updated, MAIN_BRANCH);
  const current = updated['current-snapshot-id'];
  if ((current === undefined || current < 0n ? null : current) !== mainAfter)
    refuse(`"current-snapshot-id" to ${String(current)} while main is at ${String(mainAfter)}`);

  // Properties: only the keys that changed.
  const set: Record<string, string> = {};
  for (const [k, v] of Object.entries(updated.properties)) {
    if (base.properties[k] !== v) set[k] = v;
  }
  const removals = Object.keys(base.properties).filter((k) => !(k in updated.properties));
  if (Object.keys(set).length > 0) updates.push({ action: 'set-properties', updates: set });
  if (removals.length > 0) updates.push({ action: 'remove-properties', removals });

  return { requirements, updates };
}

/** The snapshot a ref points at, or null when the table has no such ref. */
function refSnapshot(metadata: IcebergTableMetadata, name: string): SnapshotId | null {
  return metadata.refs?.[name]?.['snapshot-id'] ?? null;
}

/** Deep equality of two JSON values, bigints exact (key order counts: both sides come from one parse). */
function same(a: unknown, b: unknown): boolean {
  return a === b || stringifyJson(a ?? null) === stringifyJson(b ?? null);
}
