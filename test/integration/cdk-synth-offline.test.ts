/**
 * `npx cdk synth` of the deployable example spec (tidemark.deploy.example.yaml) as a user runs it:
 * the real cdk CLI in a child process, with no AWS credentials or profile in its environment and
 * no `docker` on its PATH (only node's own directory and the system's), into a temp output dir.
 * It must succeed and write a template with the incremental function and one schedule per table.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const out = mkdtempSync(join(tmpdir(), 'tidemark-synth-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('cdk synth offline', () => {
  it('synthesizes the deploy example with no credentials and no Docker', { timeout: 300_000 }, async () => {
    // A PATH with node and the system tools, without the directory docker lives in here.
    const path = [dirname(process.execPath), '/usr/bin', '/bin'].filter(
      (d) => !existsSync(join(d, 'docker')),
    );
    expect(path.some((d) => existsSync(join(d, 'docker')))).toBe(false);
    const env: NodeJS.ProcessEnv = {
      PATH: path.join(':'),
      HOME: out,
      // Nothing that could reach AWS: no keys, no profile, no region, no metadata lookups.
      AWS_EC2_METADATA_DISABLED: 'true',
      CDK_DISABLE_VERSION_CHECK: '1',
    };
    const cdk = join(ROOT, 'node_modules', 'aws-cdk', 'bin', 'cdk');
    const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [
          cdk,
          'synth',
          '--no-notices',
          '-c',
          'tidemark:spec=tidemark.deploy.example.yaml',
          '-o',
          join(out, 'cdk.out'),
          '--quiet',
        ],
        { cwd: ROOT, env, timeout: 280_000, maxBuffer: 64 * 2 ** 20 },
        (error, _stdout, stderr) => resolve({ code: error ? ((error.code as number) ?? 1) : 0, stderr }),
      );
    });
    expect(result.stderr).not.toMatch(/docker/i);
    expect(result.code, result.stderr.slice(-2000)).toBe(0);
    const templates = readdirSync(join(out, 'cdk.out')).filter((f) => f.endsWith('.template.json'));
    expect(templates).toEqual(['tidemark-shop.template.json']);
    const template = JSON.parse(readFileSync(join(out, 'cdk.out', templates[0]!), 'utf8')) as {
      Resources: Record<string, { Type: string }>;
    };
    const types = Object.values(template.Resources).map((r) => r.Type);
    expect(types.filter((t) => t === 'AWS::Lambda::Function').length).toBeGreaterThanOrEqual(1);
    expect(types.filter((t) => t === 'AWS::Scheduler::Schedule')).toHaveLength(2);
    expect(types).not.toContain('AWS::ECS::Service');
  });
});
