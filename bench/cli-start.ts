/**
 * `npm run bench -- cli-start [--runs N]`: the start-up of the `tidemark` CLI, bundled
 * (dist/cli/main.mjs, built by `npm install`: functions/build-cli.ts) against the TypeScript
 * sources through tsx (`TIDEMARK_FROM_SOURCE=1`), alternated round by round, paired ratios.
 * The command is `tidemark validate` of a small spec on a file:// lake: everything a run loads
 * before it opens a database (node, the module graph, the spec), nothing after.
 *
 * Owns its temp dir. Never asserts a time: it prints.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildCli } from '../functions/build-cli.js';
import { alternate, machineNote, median, ROOT_DIR, shellQuote, timeShell } from './support.js';

export async function main(argv: readonly string[]): Promise<void> {
  const { values } = parseArgs({ args: [...argv], options: { runs: { type: 'string', default: '15' } } });
  const runs = Number(values.runs);
  const { entry, bytes } = await buildCli();
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-clistart-'));
  try {
    const spec = join(dir, 'tidemark.json');
    writeFileSync(
      spec,
      JSON.stringify({
        pipeline: 'bench',
        sources: { db: { kind: 'postgres', url: 'postgres://u@127.0.0.1:1/db' } },
        tables: [{ source: 'db', table: 'public.t', mode: 'incremental', cursor: 'u', writeMode: 'append' }],
        state: { dir: join(dir, 'state') },
        lake: { uri: `file://${join(dir, 'lake')}` },
      }),
    );
    const cmd = `node ${shellQuote(join(ROOT_DIR, 'bin/tidemark.js'))} validate -c ${shellQuote(spec)} > /dev/null`;
    console.log(
      `bundle ${entry}: ${Math.round(bytes / 1024)} KiB; ${runs} alternated runs of: tidemark validate`,
    );
    const results = await alternate(
      [
        { name: 'sources through tsx', run: () => timeShell(cmd, { TIDEMARK_FROM_SOURCE: '1' }) },
        { name: 'bundled CLI', run: () => timeShell(cmd, { TIDEMARK_FROM_SOURCE: '' }) },
      ],
      runs,
    );
    const [src, bundled] = results;
    const ratios = bundled!.samples.map((s, i) => s.seconds / src!.samples[i]!.seconds);
    console.log('| variant | median wall s | median CPU s | x sources (paired, median) | min-max |');
    console.log('|---|---:|---:|---:|---|');
    for (const r of results) {
      const cpu = median(r.samples.map((s) => s.cpuSeconds ?? Number.NaN));
      const paired = r === src ? '1.00x' : `${median(ratios).toFixed(2)}x`;
      const range = r === src ? '-' : `${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}`;
      console.log(`| ${r.name} | ${r.seconds.toFixed(3)} | ${cpu.toFixed(3)} | ${paired} | ${range} |`);
    }
    console.log(machineNote());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
