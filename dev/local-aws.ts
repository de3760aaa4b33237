/**
 * `npm run local-aws`: the "same handlers against local emulators" loop without Docker. Starts
 * the DynamoDB and S3 emulators the test suite uses (dynalite and s3rver, devDependencies; not a
 * command of the published CLI) on 127.0.0.1, creates the lake bucket, and prints the spec lines
 * and environment that point a pipeline at them. Runs until Ctrl-C (or SIGTERM), then stops the
 * emulators it started, by pid.
 *
 * Options: --dynamo-port N (default 8000), --s3-port N (default 4569; 0 = a free port),
 * --bucket NAME (default tidemark-local), --dir DIR (default .tidemark/local-aws: data survives
 * restarts; delete the folder to start clean).
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { startAwsEmulators } from '../test/harness/aws-emulators.js';

const { values } = parseArgs({
  options: {
    'dynamo-port': { type: 'string', default: '8000' },
    's3-port': { type: 'string', default: '4569' },
    bucket: { type: 'string', default: 'tidemark-local' },
    dir: { type: 'string', default: '.tidemark/local-aws' },
  },
});

const dir = resolve(values.dir);
const s3Dir = join(dir, 's3');
const dynamoDir = join(dir, 'dynamo');
mkdirSync(s3Dir, { recursive: true });
mkdirSync(dynamoDir, { recursive: true });

const emulators = await startAwsEmulators({
  dynamo: true,
  s3Bucket: values.bucket,
  s3Dir,
  dynamoPath: dynamoDir,
  dynamoPort: Number(values['dynamo-port']),
  s3Port: Number(values['s3-port']),
  keepAlive: true,
}).catch((e: unknown) => {
  process.stderr.write(
    `local-aws: could not start the emulators (${(e as Error).message.split('\n')[0]}); a port may be taken: pass --dynamo-port / --s3-port (0 = any free port)\n`,
  );
  process.exit(1);
});

const out = [
  `local AWS emulators on 127.0.0.1 (pid ${emulators.pid}; Ctrl-C stops them), data in ${dir}`,
  `  DynamoDB  ${emulators.dynamoEndpoint}   (dynalite; the state table is created on first use)`,
  `  S3        ${emulators.s3Endpoint}   (s3rver; bucket ${values.bucket})`,
  '',
  'spec lines (state and lake) for a pipeline that runs against them:',
  '',
  'state:',
  `  dynamodb: { table: tidemark-local-state, region: us-east-1, endpoint: ${emulators.dynamoEndpoint} }`,
  'lake:',
  `  uri: s3://${values.bucket}/raw`,
  '  region: us-east-1',
  `  endpoint: ${emulators.s3Endpoint}`,
  '  forcePathStyle: true',
  '  tableFormat: plain   # s3rver ignores conditional writes, which Iceberg tables need (docs/iceberg.md)',
  '',
  'and the credentials s3rver checks (dynalite takes any):',
  '',
  'export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1',
  '',
  'then: npx tidemark run -c <spec>   or   npx tidemark invoke incremental -c <spec> --table <schema.table>',
  '',
];
process.stdout.write(out.join('\n'));

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await emulators.stop();
  process.stdout.write('local-aws: emulators stopped\n');
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
