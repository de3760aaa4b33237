/**
 * Picks a free TCP port on the loopback interface for a local server we are about to start.
 *
 * Owns: the port probe only. It never binds anything but 127.0.0.1. The port is free when this
 * returns, not reserved: a server that loses the race fails to bind and says so in its log.
 */
import { createServer } from 'node:net';

/** A TCP port that nothing listens on at 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : undefined;
      probe.close(() => (port ? resolve(port) : reject(new Error('the OS assigned no port'))));
    });
  });
}
