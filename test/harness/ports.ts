/**
 * Ports for tests that need a connection refused: a 127.0.0.1 port bound by this process, then
 * closed, so nothing listens on it (another process could take it again, which the tests that
 * use it tolerate: they assert on a failed connection, and a port reused that fast is rare).
 */
import { createServer } from 'node:net';

/** A 127.0.0.1 port nothing listens on (bound, then closed). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}
