/**
 * A scripted-source reader in its own process, for kill-and-resume tests:
 *
 *   node --import tsx test/harness/scripted-child.ts <stateDir> '<ScriptParams JSON>' [delayMs]
 *
 * Generates the script from the params (deterministic, so the parent has the same one), starts
 * from the server's confirmed position, and confirms every commit, printing `confirmed <step>`
 * once each confirmation is durable; at the end prints `ended`. The parent SIGKILLs it whenever
 * it likes and resumes from the state directory.
 */
import { generateScript, ScriptedServer, type ScriptParams, scriptCdcTables } from './scripted-source.js';

async function main(): Promise<void> {
  const [dir, paramsJson, delay] = process.argv.slice(2);
  if (!dir || !paramsJson) throw new Error('usage: scripted-child.ts <stateDir> <paramsJson> [delayMs]');
  const script = generateScript(JSON.parse(paramsJson) as ScriptParams);
  const server = new ScriptedServer(script, dir);
  const reader = server.openReader(scriptCdcTables(script), { delayMs: Number(delay ?? 0) });
  await reader.start({
    position: (await server.confirmed()) ?? (await reader.initialPosition()),
    next: new Map(),
  });
  for (;;) {
    const ev = await reader.next(1000);
    if (ev === undefined) {
      if (reader.ended) break;
      continue;
    }
    if (ev.kind === 'rows') reader.cut(ev.table);
    if (ev.kind === 'commit') {
      await reader.setConfirmed(ev.position);
      process.stdout.write(`confirmed ${ev.position.value}\n`);
    }
  }
  await reader.close();
  process.stdout.write('ended\n');
}

main().catch((e: unknown) => {
  process.stderr.write(`${String((e as Error).stack ?? e)}\n`);
  process.exit(1);
});
