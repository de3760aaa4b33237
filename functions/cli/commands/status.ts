/**
 * `tidemark status`: per table the cursor, the last commit, rows and the lease.
 */
import { parseArgs } from 'node:util';
import { tableTarget } from '../../../shared/config/spec.js';
import { incrementalStateKey } from '../../../shared/engine/incremental-run.js';
import { parseIncrementalState } from '../../../shared/engine/incremental-state.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { specArg } from '../args.js';

export async function cmdStatus(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string', short: 'c' } } });
  const spec = specArg(values);
  const pipeline = await openPipeline(spec, { sourcesLazy: true });
  try {
    const rows = [];
    for (const t of spec.tables) {
      const rec = await pipeline.store.load(incrementalStateKey(spec.pipeline, tableTarget(t)));
      const st = parseIncrementalState(rec.value, t.cursor);
      const lease = rec.lease && rec.lease.expiresAt > Date.now() ? `held by ${rec.lease.owner}` : 'free';
      rows.push({
        table: tableTarget(t),
        cursor: st.cursorText ?? (st.cursor || '(start)'),
        pages: st.seq,
        rows: st.rowsTotal,
        lastCommit: st.lastCommitAt ?? 'never',
        lagSeconds: st.lastCommitAt ? Math.round((Date.now() - Date.parse(st.lastCommitAt)) / 1000) : null,
        lease,
      });
    }
    console.table(rows);
  } finally {
    await pipeline.close();
  }
}
