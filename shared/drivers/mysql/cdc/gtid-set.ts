/**
 * A MySQL GTID set (`@@GLOBAL.gtid_executed`): per source uuid (and, MySQL 8.3+, per tag) the
 * transaction numbers already executed, as sorted, disjoint, non-adjacent inclusive intervals.
 * Text form as MySQL prints it: `uuid:1-5:7-9,uuid2:1-3`, uuids lowercase and sorted, a uuid's
 * untagged intervals first and then its tags (lowercase, sorted), each followed by its intervals:
 * `uuid:1-5:tag_a:1:tag_b:2-3`. GNOs are bigints (MySQL allows 1 to 2^63-1). Pure: no I/O.
 */

/** `[start, end]` inclusive. */
export type GtidInterval = readonly [bigint, bigint];
/** uuid -> tag ('' untagged) -> intervals. Treat as immutable outside this module. */
export type GtidSet = Map<string, Map<string, GtidInterval[]>>;

const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/;
const TAG = /^[a-z_][a-z0-9_]{0,31}$/;
const GNO = /^[0-9]+$/;
const MAX_GNO = (1n << 63n) - 1n;

export function emptyGtidSet(): GtidSet {
  return new Map();
}

function normaliseUuid(text: string): string {
  const t = text.trim().toLowerCase();
  if (!UUID.test(t)) throw new Error(`invalid GTID source uuid '${text.trim()}'`);
  const h = t.replaceAll('-', '');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function gno(text: string, entry: string): bigint {
  const t = text.trim();
  if (!GNO.test(t)) throw new Error(`invalid GTID number '${t}' in '${entry}'`);
  const n = BigInt(t);
  if (n < 1n || n > MAX_GNO) throw new Error(`GTID number ${t} out of range 1..2^63-1 in '${entry}'`);
  return n;
}

/** Inserts `[s, e]` into sorted disjoint non-adjacent intervals, merging overlaps and neighbours. */
function insert(list: GtidInterval[], s: bigint, e: bigint): void {
  let lo = 0;
  // First interval that could touch [s, e]: its end + 1 >= s.
  while (lo < list.length && list[lo]![1] + 1n < s) lo++;
  let hi = lo;
  let ns = s;
  let ne = e;
  while (hi < list.length && list[hi]![0] <= e + 1n) {
    if (list[hi]![0] < ns) ns = list[hi]![0];
    if (list[hi]![1] > ne) ne = list[hi]![1];
    hi++;
  }
  list.splice(lo, hi - lo, [ns, ne]);
}

function intervalsOf(set: GtidSet, uuid: string, tag: string): GtidInterval[] {
  let tags = set.get(uuid);
  if (!tags) {
    tags = new Map();
    set.set(uuid, tags);
  }
  let list = tags.get(tag);
  if (!list) {
    list = [];
    tags.set(tag, list);
  }
  return list;
}

/** Adds one interval (mutates `set`). */
export function addInterval(set: GtidSet, uuid: string, start: bigint, end: bigint, tag = ''): GtidSet {
  if (start < 1n || end < start || end > MAX_GNO) throw new Error(`invalid GTID interval ${start}-${end}`);
  insert(intervalsOf(set, normaliseUuid(uuid), tag.toLowerCase()), start, end);
  return set;
}

/**
 * Adds one GTID, `uuid:gno` or `uuid:tag:gno` (zongji's `Gtid.gtid`), or `(uuid, gno)`. Mutates `set`.
 */
export function addGtid(set: GtidSet, gtid: string, n?: bigint | number | string, tag = ''): GtidSet {
  if (n !== undefined) return addInterval(set, gtid, BigInt(n), BigInt(n), tag);
  const parts = gtid.split(':');
  if (parts.length === 2) return addInterval(set, parts[0]!, gno(parts[1]!, gtid), gno(parts[1]!, gtid));
  if (parts.length === 3 && TAG.test(parts[1]!.trim().toLowerCase()))
    return addInterval(set, parts[0]!, gno(parts[2]!, gtid), gno(parts[2]!, gtid), parts[1]!.trim());
  throw new Error(`invalid GTID '${gtid}'`);
}

/**
 * Parses MySQL's text form (whitespace and newlines tolerated, as `@@gtid_executed` prints them;
 * uuids in any case and repeated; overlapping intervals merged). '' is the empty set.
 */
export function parseGtidSet(text: string): GtidSet {
  const set = emptyGtidSet();
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const parts = entry.split(':');
    if (parts.length < 2) throw new Error(`invalid GTID set entry '${entry}'`);
    const uuid = normaliseUuid(parts[0]!);
    let tag = '';
    let pendingTag = false;
    for (const item of parts.slice(1)) {
      const t = item.trim().toLowerCase();
      if (TAG.test(t)) {
        if (pendingTag) throw new Error(`GTID tag without intervals in '${entry}'`);
        tag = t;
        pendingTag = true;
        continue;
      }
      const bounds = t.split('-');
      if (bounds.length > 2) throw new Error(`invalid GTID interval '${t}' in '${entry}'`);
      const s = gno(bounds[0]!, entry);
      const e = bounds.length === 2 ? gno(bounds[1]!, entry) : s;
      if (e < s) throw new Error(`invalid GTID interval '${t}' in '${entry}'`);
      insert(intervalsOf(set, uuid, tag), s, e);
      pendingTag = false;
    }
    if (pendingTag) throw new Error(`GTID tag without intervals in '${entry}'`);
  }
  return set;
}

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** MySQL's text form: `uuid:1-5:7-9,uuid2:1-3`; '' for the empty set. */
export function renderGtidSet(set: GtidSet): string {
  const out: string[] = [];
  for (const uuid of [...set.keys()].sort(byText)) {
    const tags = set.get(uuid)!;
    let text = uuid;
    let any = false;
    for (const tag of [...tags.keys()].sort(byText)) {
      const list = tags.get(tag)!;
      if (list.length === 0) continue;
      if (tag !== '') text += `:${tag}`;
      for (const [s, e] of list) text += s === e ? `:${s}` : `:${s}-${e}`;
      any = true;
    }
    if (any) out.push(text);
  }
  return out.join(',');
}

/** Whether `set` holds the GTID `uuid:gno` / `uuid:tag:gno`. */
export function containsGtid(set: GtidSet, gtid: string): boolean {
  const parts = gtid.split(':');
  if (parts.length !== 2 && parts.length !== 3) throw new Error(`invalid GTID '${gtid}'`);
  const tag = parts.length === 3 ? parts[1]!.trim().toLowerCase() : '';
  const n = gno(parts[parts.length - 1]!, gtid);
  const list = set.get(normaliseUuid(parts[0]!))?.get(tag);
  if (!list) return false;
  let lo = 0;
  let hi = list.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [s, e] = list[mid]!;
    if (n < s) hi = mid - 1;
    else if (n > e) lo = mid + 1;
    else return true;
  }
  return false;
}
