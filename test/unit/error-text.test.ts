/**
 * How the CLI prints an error (functions/cli/args.ts `errorText`): a first line of at most
 * HEADLINE_MAX characters, the rest of a long reason on indented lines cut at clause boundaries,
 * nothing of the reason lost. A fast-check property over reasons made of words, clause
 * punctuation, asides in parentheses and quoted names, and a table of the long messages the code
 * base throws.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { errorText, HEADLINE_MAX } from '../../functions/cli/args.js';

/** The printed lines of a reason (errorText ends with a newline). */
function printed(reason: string): string[] {
  const text = errorText(reason);
  expect(text.endsWith('\n')).toBe(true);
  return text.slice(0, -1).split('\n');
}

/** The reason's words and punctuation in order, as the printed lines carry them. */
function content(text: string): string {
  // A headline drops the semicolon or comma it ends at; whitespace is where lines were cut.
  return text.replace(/[;,]/g, '').replace(/\s+/g, '');
}

const word = fc.stringMatching(/^[a-zA-Z0-9_./#-]{1,30}$/);
const piece = fc.oneof(
  { weight: 8, arbitrary: word },
  { weight: 2, arbitrary: fc.constantFrom(';', '.', ',', ':') },
  { weight: 1, arbitrary: word.map((w) => `(${w}`) },
  { weight: 1, arbitrary: word.map((w) => `${w})`) },
  { weight: 1, arbitrary: word.map((w) => `"${w}"`) },
  { weight: 1, arbitrary: fc.integer({ min: 120, max: 400 }).map((n) => 'z'.repeat(n)) },
);
const reason = fc
  .array(piece, { minLength: 1, maxLength: 200 })
  .map((pieces) => pieces.join(' ').replace(/ ([;.,:])/g, '$1'));

describe('errorText', () => {
  it('prints a first line of at most HEADLINE_MAX characters and loses nothing (property)', () => {
    fc.assert(
      fc.property(reason, (r) => {
        const lines = printed(r);
        expect(lines[0]!.startsWith('tidemark: ')).toBe(true);
        for (const l of lines) expect(l.length).toBeLessThanOrEqual(HEADLINE_MAX);
        for (const l of lines.slice(1)) expect(l.startsWith('  ')).toBe(true);
        expect(content(lines.join('\n').slice('tidemark: '.length))).toBe(content(r));
        // A reason that fits is printed as it is, on one line.
        if (`tidemark: ${r.trim()}`.length <= HEADLINE_MAX) expect(lines).toEqual([`tidemark: ${r.trim()}`]);
      }),
      { numRuns: 500 },
    );
  });

  it('cuts at the last clause boundary that fits, never inside an aside or a quoted name', () => {
    const head = `${'a'.repeat(60)} (first; aside) second clause`;
    const lines = printed(`${head}; ${'b'.repeat(100)}, ${'c '.repeat(40)}done. "quoted; name" tail`);
    expect(lines[0]).toBe(`tidemark: ${head}`);
    expect(lines[1]!.startsWith(`  ${'b'.repeat(100)},`)).toBe(true);
    expect(lines.join('\n')).toContain('"quoted; name"');
  });

  it('keeps the lines after the first as they are (a spec with several problems)', () => {
    const lines = printed('2 problems in the spec:\n  - tables[0].cursor: required\n  - lake.uri: required');
    expect(lines).toEqual([
      'tidemark: 2 problems in the spec:',
      '  - tables[0].cursor: required',
      '  - lake.uri: required',
    ]);
  });

  it('hides a secret before cutting, so no part of it is printed', () => {
    const secret = 'Zq9xK7tail8899';
    const lines = printed(
      `${'x '.repeat(90)}postgres://u:${secret}@db:5432/app is unreachable; ${'y '.repeat(80)}`,
    );
    expect(lines.join('\n')).not.toContain(secret.slice(0, 4));
    expect(lines[0]!.length).toBeLessThanOrEqual(HEADLINE_MAX);
  });

  // The long reasons the code base throws, word for word (shared/pipeline/reset-table.ts,
  // shared/aws/errors.ts, the Postgres driver), with realistic names: each headline fits and says
  // what happened.
  it.each([
    {
      what: "reset's refusal of a cdc table",
      reason:
        '--table: public.orders is a mode: cdc table without incremental state to retire; a cdc table is reset by re-snapshotting it, which arrives with on-demand re-snapshots (a later release; the initial snapshot of a new table exists: a new "target:" loads the table afresh), so nothing was changed. What a reset would replace: cdc#shop#app holds its entry: 1200 row(s) in 3 object(s) committed, next 0/16B3A38, last flush 2026-12-07T10:00:00.000Z; the source resumes at 0/16B3A38; the lake holds 3 object(s) (0.1 MB) of writer shop.app for it. Until then: give the table a new "target:" (a new lake table, captured from the source\'s position on; the old one keeps its objects); or leave CDC: set the table to mode: incremental (with a cursor) and run "tidemark reset --table public.orders --delete-objects" (this writer\'s objects of it are deleted, its entry leaves cdc#shop#app, the next run syncs it from the start); or leave it as it is: its capture resumes where cdc#shop#app says.',
      headline: 'tidemark: --table: public.orders is a mode: cdc table without incremental state to retire',
    },
    {
      what: 'a DynamoDB endpoint nothing answers at',
      reason:
        'no DynamoDB endpoint answered at http://127.0.0.1:40123 (ECONNREFUSED) for table tidemark-state: check state.dynamodb.endpoint and state.dynamodb.region; this network must reach DynamoDB (a VPC endpoint or NAT in AWS; locally, the emulator running)',
      headline:
        'tidemark: no DynamoDB endpoint answered at http://127.0.0.1:40123 (ECONNREFUSED) for table tidemark-state: check state.dynamodb.endpoint and state.dynamodb.region',
    },
    {
      what: 'a Postgres source nothing answers at',
      reason:
        'public.orders: cannot connect to Postgres at db.internal.example.com:5432 (ECONNREFUSED); check the host and port in sources.app and that the server accepts TCP connections from here (security group, firewall, listen_addresses)',
      headline:
        'tidemark: public.orders: cannot connect to Postgres at db.internal.example.com:5432 (ECONNREFUSED)',
    },
  ])('$what', ({ reason: r, headline }) => {
    const lines = printed(r);
    expect(lines[0]).toBe(headline);
    expect(lines[0]!.length).toBeLessThanOrEqual(HEADLINE_MAX);
    expect(content(lines.join(' ').slice('tidemark: '.length))).toBe(content(r));
  });
});
