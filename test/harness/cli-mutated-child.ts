/**
 * The real CLI (functions/cli/main.ts, from the sources) with a broken step of the durability
 * order injected around the file state store, for the crash tests' mutation runs:
 *
 *   TIDEMARK_TEST_MUTATION=position-at-first-flush node --import tsx test/harness/cli-mutated-child.ts cdc -c spec.yaml
 *
 * `position-at-first-flush`: a CDC state commit keeps its resume position only once a table has
 * flushed (some table has a `next`): the start position becomes durable after streaming began,
 * as it did before the engine committed `Reader.initialPosition` first. A restart before the
 * first flush then finds no position and begins at the source's current end.
 *
 * `position-at-first-flush-unguarded`: the same, and the MySQL reader claims its server keeps the
 * position (`Reader.keepsPosition`), so the engine's guard against a state without a position is
 * off too: the restart takes the current binlog end.
 *
 * The wrappers patch prototypes in this process only; production code has no switch.
 */
import { MysqlCdcReader } from '../../shared/drivers/mysql/cdc/reader.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';

const mutation = process.env.TIDEMARK_TEST_MUTATION;
if (mutation === 'position-at-first-flush-unguarded') {
  // The engine's own guard off as well: the binlog reader claims the server keeps its position,
  // so a start that finds no position in the state takes the current binlog end, as releases
  // before the guard did.
  Object.defineProperty(MysqlCdcReader.prototype, 'keepsPosition', { get: () => true });
}
if (mutation === 'position-at-first-flush' || mutation === 'position-at-first-flush-unguarded') {
  const commit = FileCursorStore.prototype.commit;
  FileCursorStore.prototype.commit = function (this: FileCursorStore, key, req) {
    const value = req.value as { position?: unknown; tables?: Record<string, { next?: string }> };
    const flushed = Object.values(value.tables ?? {}).some((t) => t.next !== undefined);
    if (!key.startsWith('cdc#') || flushed) return commit.call(this, key, req);
    const { position: _dropped, ...rest } = value;
    return commit.call(this, key, { ...req, value: rest });
  };
} else if (mutation !== undefined) {
  throw new Error(`cli-mutated-child: unknown TIDEMARK_TEST_MUTATION "${mutation}"`);
}
process.argv = [process.argv[0]!, 'tidemark', ...process.argv.slice(2)];
await import('../../functions/cli/main.js');
