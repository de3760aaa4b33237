/**
 * pgoutput text values into the column writers, through the incremental driver's type plan
 * (../types.ts `readPlan`, `parseColumnText`), so a row gives the same lake values whether it
 * was read by binary COPY or from the log (docs/types.md).
 *
 * Owns: one appender per column, chosen once per Relation: the hot kinds (integers, text, bool,
 * float8) straight from the bytes; every other kind through the row path's text parser, which
 * the incremental suite proves equal to the COPY path. The one difference of forms: a `real`
 * (float4) column is selected as `::float8` by both incremental paths, while pgoutput sends the
 * float4's own shortest text (`0.1`), so it is rounded to float4 with `Math.fround` first
 * (0.1 -> 0.10000000149011612, what the cast gives). And `inet`, selected as `::text` by both
 * incremental paths, whose cast always prints the netmask (`10.0.0.1/32`) while inet's own
 * output (what pgoutput sends) leaves a host's mask out: the mask is added back.
 * Must never: approximate (a value the column cannot hold is the writer's DataError).
 */
import type { ColumnWriter } from '../../../dataplane/encoder.js';
import type { ValueContext } from '../../value-context.js';
import { OID, parseColumnText, type ReadPlan } from '../types.js';

const INET_OID = 869;

/** inet's output text as `inet::text` prints it: with the netmask, also for a single host. */
export function inetAsText(s: string): string {
  return s.includes('/') ? s : `${s}${s.includes(':') ? '/128' : '/32'}`;
}

/** Appends the text value `buf[s, e)` to `w`. */
export type Appender = (w: ColumnWriter, buf: Buffer, s: number, e: number) => void;

/** Parses ASCII digits with an optional sign; NaN when not a plain integer of at most 15 digits. */
function smallInt(buf: Buffer, s: number, e: number): number {
  let i = s;
  let neg = false;
  if (buf[i] === 0x2d) {
    neg = true;
    i++;
  }
  const n = e - i;
  if (n <= 0 || n > 15) return Number.NaN;
  let v = 0;
  for (; i < e; i++) {
    const d = buf[i]! - 0x30;
    if (d < 0 || d > 9) return Number.NaN;
    v = v * 10 + d;
  }
  return neg ? -v : v;
}

/**
 * The appender of a column read by `plan`, whose base type is `baseOid` (for arrays: the
 * element's base type is `elementOid`).
 */
export function appenderFor(
  plan: ReadPlan,
  baseOid: number,
  elementOid: number,
  ctx: ValueContext,
): Appender {
  const generic: Appender = (w, buf, s, e) =>
    w.appendValue(parseColumnText(plan, buf.toString('utf8', s, e), ctx));
  if (plan.list) {
    if (elementOid === INET_OID)
      return (w, buf, s, e) => {
        const v = parseColumnText(plan, buf.toString('utf8', s, e), ctx) as (string | null)[];
        w.appendValue(v.map((x) => (x === null ? null : inetAsText(x))));
      };
    if (elementOid !== OID.float4) return generic;
    return (w, buf, s, e) => {
      const v = parseColumnText(plan, buf.toString('utf8', s, e), ctx) as (number | null)[];
      w.appendValue(v.map((x) => (x === null ? null : Math.fround(x))));
    };
  }
  if (baseOid === INET_OID && plan.wire === 'text')
    return (w, buf, s, e) => w.appendText(inetAsText(buf.toString('latin1', s, e)));
  switch (plan.wire) {
    case 'text':
    case 'uuid':
    case 'jsonb':
      return (w, buf, s, e) => w.appendUtf8Bytes(buf, s, e);
    case 'bool':
      return (w, buf, s) => w.appendBool(buf[s] === 0x74);
    case 'int2':
    case 'int4':
      return (w, buf, s, e) => w.appendInt(smallInt(buf, s, e));
    case 'int8':
      return (w, buf, s, e) => {
        const v = smallInt(buf, s, e);
        if (Number.isNaN(v)) w.appendBigInt(BigInt(buf.toString('latin1', s, e)));
        else w.appendInt(v);
      };
    case 'float8':
      if (baseOid === OID.float4)
        return (w, buf, s, e) => w.appendFloat64(Math.fround(Number(buf.toString('latin1', s, e))));
      return (w, buf, s, e) => w.appendFloat64(Number(buf.toString('latin1', s, e)));
    default:
      return generic;
  }
}
