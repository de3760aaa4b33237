/**
 * Child process that serves the local AWS emulators for a test run: dynalite (DynamoDB, in
 * memory) and s3rver (S3, files in a temp dir). Started by `aws-emulators.ts`.
 *
 * Why a separate process (and plain JavaScript, so no TypeScript loader slows its start): s3rver
 * encrypts ListObjectsV2 continuation tokens with DES, which OpenSSL 3 only offers under
 * `--openssl-legacy-provider`. That flag must be on the process that RUNS s3rver; running it
 * here means neither vitest nor the test processes (the S3 clients) need it.
 *
 * Arguments: --dir <s3 dir> [--dynamo] [--s3-bucket <name>] [--dynamo-port N] [--s3-port N]
 * [--dynamo-path <dir>] (ports default to 0, a free one; with a path dynalite keeps its tables on
 * disk, as the `npm run local-aws` loop does; tests keep them in memory). Reports
 * `{ dynamoEndpoint?, s3Endpoint? }` over IPC once listening, and exits when its parent goes
 * away (IPC disconnect) or on SIGTERM/SIGINT. Never binds anything but 127.0.0.1.
 */
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    dir: { type: 'string' },
    dynamo: { type: 'boolean', default: false },
    's3-bucket': { type: 'string' },
    'dynamo-port': { type: 'string', default: '0' },
    's3-port': { type: 'string', default: '0' },
    'dynamo-path': { type: 'string' },
  },
});

const ready = {};

if (values.dynamo) {
  const { default: dynalite } = await import('dynalite');
  // Tables become ACTIVE at once instead of after 500 ms.
  const server = dynalite({
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
    ...(values['dynamo-path'] ? { path: values['dynamo-path'] } : {}),
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(values['dynamo-port']), '127.0.0.1', resolve);
  });
  ready.dynamoEndpoint = `http://127.0.0.1:${server.address().port}`;
}

if (values['s3-bucket']) {
  if (!values.dir) throw new Error('--dir is required with --s3-bucket');
  const { default: S3rver } = await import('s3rver');
  const s3 = new S3rver({
    address: '127.0.0.1',
    port: Number(values['s3-port']),
    silent: true,
    directory: values.dir,
    configureBuckets: [{ name: values['s3-bucket'] }],
  });
  const address = await s3.run();
  ready.s3Endpoint = `http://127.0.0.1:${address.port}`;
}

// Both keep their data in memory or in the caller's temp dir: there is nothing to flush, and a
// graceful close would wait up to 30 s for the SDK clients' keep-alive sockets.
const shutdown = () => process.exit(0);
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
process.on('disconnect', shutdown);

process.send?.(ready);
