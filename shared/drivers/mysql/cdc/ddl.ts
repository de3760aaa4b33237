/**
 * The statements of the binlog's QUERY events that the MySQL reader reports: TRUNCATE, DROP
 * TABLE, RENAME TABLE and ALTER TABLE ... RENAME of a captured table, each a `ddl` event (the
 * engine records a truncate or stops, per the table's `onTruncate`). Column changes are not read
 * from the statement: the next TableMap describes the columns (./table.ts).
 *
 * Owns: recognizing those statements and resolving the names they act on (backquotes, a missing
 * database meaning the event's current one, comments ignored). Anything else is no event. Pure:
 * no I/O.
 */
import type { CdcEvent } from '../../../contracts/cdc.js';

/**
 * The `ddl` events of statement `sql` (current database `defaultDb`) for the captured tables
 * it names (`captured`: source `database.table` -> its state, with its lake table `target`).
 */
export function ddlEvents(
  sql: string,
  defaultDb: string,
  captured: ReadonlyMap<string, { readonly target: string }>,
): CdcEvent[] {
  const out: CdcEvent[] = [];
  for (const hit of destructiveTargets(sql, defaultDb)) {
    const t = captured.get(hit.table);
    if (t)
      out.push({
        kind: 'ddl',
        ddl: { source: 'mysql', kind: hit.kind, table: t.target, detail: sql.slice(0, 500) },
      });
  }
  return out;
}

/**
 * The tables a statement truncates, drops or renames away (`database.table`, unquoted; names
 * without a database are in `defaultDb`, the QUERY event's current database). Only TRUNCATE,
 * DROP TABLE, RENAME TABLE and ALTER TABLE ... RENAME [TO|AS] are recognized; comments are
 * ignored.
 */
export function destructiveTargets(
  sql: string,
  defaultDb: string,
): { kind: 'truncate' | 'ddl'; table: string }[] {
  const stripped = sql
    .replace(/\/\*.*?\*\//gs, ' ')
    .replace(/--\s[^\n]*/g, ' ')
    .trim();
  const unquote = (p: string) => {
    const t = p.trim();
    return t.startsWith('`') ? t.slice(1, -1).replace(/``/g, '`') : t;
  };
  const resolve = (name: string): string => {
    const parts = splitDotted(name.trim());
    return parts.length >= 2
      ? `${unquote(parts[0]!)}.${unquote(parts[1]!)}`
      : `${defaultDb}.${unquote(parts[0] ?? '')}`;
  };
  const name = '((?:`(?:[^`]|``)+`|[\\w$]+)(?:\\s*\\.\\s*(?:`(?:[^`]|``)+`|[\\w$]+))?)';
  let m = new RegExp(`^TRUNCATE\\s+(?:TABLE\\s+)?${name}`, 'i').exec(stripped);
  if (m) return [{ kind: 'truncate', table: resolve(m[1]!) }];
  m = /^DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?(.*?)(?:\s+(?:RESTRICT|CASCADE))?\s*$/is.exec(
    stripped,
  );
  if (m) return splitNames(m[1]!).map((n) => ({ kind: 'ddl', table: resolve(n) }));
  m = /^RENAME\s+TABLES?\s+(.*)$/is.exec(stripped);
  if (m)
    return splitNames(m[1]!).flatMap((pair) => {
      const from = pair.split(/\s+TO\s+/i)[0];
      return from ? [{ kind: 'ddl' as const, table: resolve(from) }] : [];
    });
  m = new RegExp(`^ALTER\\s+(?:ONLINE\\s+|IGNORE\\s+)*TABLE\\s+${name}\\s+(.*)$`, 'is').exec(stripped);
  if (m && /(^|,)\s*RENAME\s+(?!(?:COLUMN|INDEX|KEY)\b)/i.test(m[2] ?? ''))
    return [{ kind: 'ddl', table: resolve(m[1]!) }];
  return [];
}

/** Splits `a`.`b` / a.b at the dot outside backquotes. */
function splitDotted(name: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (const ch of name) {
    if (ch === '`') quoted = !quoted;
    if (ch === '.' && !quoted) {
      out.push(cur.trim());
      cur = '';
    } else cur += ch;
  }
  out.push(cur.trim());
  return out;
}

/** Splits a comma-separated list of (possibly backquoted) names or `a TO b` pairs. */
function splitNames(list: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (const ch of list) {
    if (ch === '`') quoted = !quoted;
    if (ch === ',' && !quoted) {
      out.push(cur.trim());
      cur = '';
    } else cur += ch;
  }
  if (cur.trim() !== '') out.push(cur.trim());
  return out;
}
