/**
 * One bench run in two checkouts, alternated, with paired ratios: the before/after check of a
 * change that should not move a figure (a refactor). Each round runs `npm run bench -- ARGS` in
 * the before tree and in the after tree (the order swapped every round, so a drift of the
 * machine falls on both sides alike), reads every result row the bench prints (`| variant |
 * median s | ...`) and pairs the after/before wall time of each variant per round.
 *
 *   npx tsx bench/compare-trees.ts --before DIR [--after DIR] [--rounds N] -- <bench args>
 *   e.g. --before /tmp/before -- incremental --gate --runs 1 --rss-rows 0 --data-dir /tmp/benchpg
 *
 * A ratio above 1 means the after tree took longer. Run-to-run noise is read from the same
 * output: the spread of the ratios of the variants the change cannot touch (the wire and by-hand
 * baselines) is what "no regression beyond the noise" is held against.
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';

const split = process.argv.indexOf('--');
const own = split < 0 ? process.argv.slice(2) : process.argv.slice(2, split);
const benchArgs = split < 0 ? [] : process.argv.slice(split + 1);
const { values } = parseArgs({
  args: own,
  options: {
    before: { type: 'string' },
    after: { type: 'string', default: process.cwd() },
    rounds: { type: 'string', default: '3' },
  },
  strict: true,
});
if (!values.before || benchArgs.length === 0) {
  console.error(
    'usage: npx tsx bench/compare-trees.ts --before DIR [--after DIR] [--rounds N] -- <bench args>',
  );
  process.exit(2);
}
const trees = { before: resolve(values.before), after: resolve(values.after!) };
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) throw new Error('--rounds must be a whole number >= 1');

/** A result row's variant, the same in both trees whatever the classes were called then. */
const variantKey = (name: string): string => name.trim().replace(/\bPg(?=[A-Z])/g, 'Postgres');

/** Every `| variant | seconds | ...` row of a bench's output: variant -> median seconds. */
function resultRows(out: string): Map<string, number> {
  const rows = new Map<string, number>();
  for (const line of out.split('\n')) {
    const cells = line.split(/(?<!\\)\|/).map((c) => c.trim());
    if (cells.length < 4 || cells[1] === 'variant' || cells[1]?.startsWith('---')) continue;
    const seconds = Number(cells[2]);
    if (cells[1] && Number.isFinite(seconds) && seconds > 0) rows.set(variantKey(cells[1]), seconds);
  }
  return rows;
}

function runIn(tree: string): Map<string, number> {
  const started = Date.now();
  const r = spawnSync('npx', ['tsx', 'bench/run.ts', ...benchArgs], {
    cwd: tree,
    encoding: 'utf8',
    maxBuffer: 64 * 2 ** 20,
  });
  if (r.status !== 0) {
    console.error(r.stdout, r.stderr);
    throw new Error(`the bench failed in ${tree} (exit ${r.status})`);
  }
  const rows = resultRows(r.stdout);
  if (rows.size === 0) throw new Error(`no result rows in the output of the bench in ${tree}`);
  console.log(`  ${tree}: ${rows.size} variants in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return rows;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

console.log(
  `bench: ${benchArgs.join(' ')}\nbefore: ${trees.before}\nafter: ${trees.after}\n${rounds} rounds`,
);
const ratios = new Map<string, number[]>();
const seconds = new Map<string, { before: number[]; after: number[] }>();
for (let round = 0; round < rounds; round++) {
  console.log(`round ${round + 1}:`);
  const order = round % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const);
  const got = { before: new Map<string, number>(), after: new Map<string, number>() };
  for (const side of order) got[side] = runIn(trees[side]);
  for (const [variant, b] of got.before) {
    const a = got.after.get(variant);
    if (a === undefined) continue;
    ratios.set(variant, [...(ratios.get(variant) ?? []), a / b]);
    const s = seconds.get(variant) ?? { before: [], after: [] };
    s.before.push(b);
    s.after.push(a);
    seconds.set(variant, s);
  }
}
console.log(
  '\n| variant | before median s | after median s | after/before (paired, median) | per round |\n|---|---:|---:|---:|---|',
);
for (const [variant, rs] of ratios) {
  const s = seconds.get(variant)!;
  console.log(
    `| ${variant} | ${median(s.before).toFixed(2)} | ${median(s.after).toFixed(2)} | ${median(rs).toFixed(3)}x | ` +
      `${rs.map((x) => x.toFixed(3)).join(', ')} |`,
  );
}
