/**
 * Loads the spec file `cdk deploy` ships. The deployed function reads the bundled copy of the file
 * as written, in an environment that has none of the deployer's variables, so a spec that only
 * works through `${env:NAME}` interpolation is refused here, at synth, instead of failing at the
 * first scheduled run.
 *
 * Owns: that one deploy-time rule on the file, and the text of the spec the deployment carries
 * (`deployedSpecText`: the file without its comments). Validation itself is `loadSpecFile`'s; this
 * module never interpolates the file (an interpolated copy could put a password into the asset).
 */
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { parseDocument, parse as parseYaml, visit } from 'yaml';
import { loadSpecFile, type Spec } from '../shared/config/spec.js';
import { ConfigError } from '../shared/contracts/errors.js';

const ENV_REFERENCE = /\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/;

/**
 * Reads, validates and checks a spec file for deployment.
 * @throws ConfigError when the file is missing or invalid, or a value uses `${env:NAME}`.
 */
export function loadDeployableSpec(path: string, env?: NodeJS.ProcessEnv): Spec {
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(path, 'utf8'));
  } catch {
    // Unreadable or not YAML: loadSpecFile throws the ConfigError every entry point uses for it.
    return loadSpecFile(path, env);
  }
  // Before validation: an unset variable would otherwise be reported as "not set", and setting
  // it locally would not help the deployed function.
  const found = findEnvReference(raw, '');
  if (found) {
    throw new ConfigError(
      found.path,
      `uses \${env:${found.name}}, which the deployed function cannot resolve (the spec is bundled as written and its environment has no ${found.name}); write the value into the spec, and use "secretArn" for credentials`,
    );
  }
  return loadSpecFile(path, env);
}

/** The first string value (depth first, in file order) that references an environment variable. */
function findEnvReference(value: unknown, path: string): { path: string; name: string } | undefined {
  if (typeof value === 'string') {
    const m = ENV_REFERENCE.exec(value);
    return m ? { path: path || '(spec)', name: m[1]! } : undefined;
  }
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) {
      const found = findEnvReference(v, `${path}[${i}]`);
      if (found) return found;
    }
    return undefined;
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const found = findEnvReference(v, path ? `${path}.${k}` : k);
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * The spec as the deployment carries it: the same YAML document without its comments, in the CDC
 * task's environment (`TIDEMARK_SPEC_YAML`, rendered into the CloudFormation template) and in the
 * Lambda asset. A comment is not the spec: it may hold what the spec must not (a commented-out
 * URL with its password, an example `${env:NAME}`, which CloudFormation's validation flags as an
 * embedded parameter), and nothing reads it. Only comments go: keys, values, quoting, anchors
 * and aliases are re-emitted from the parsed document, lines are never folded, and the result is
 * checked to parse to the same value as the file.
 * @throws ConfigError when the text is not one YAML document.
 * @example
 * deployedSpecText('pipeline: shop   # the name\n') // 'pipeline: shop\n'
 */
export function deployedSpecText(text: string): string {
  const doc = parseDocument(text);
  if (doc.errors.length > 0) {
    throw new ConfigError('', `the spec is not one YAML document: ${doc.errors[0]!.message}`);
  }
  doc.commentBefore = null;
  doc.comment = null;
  visit(doc, {
    Node(_, node) {
      node.commentBefore = null;
      node.comment = null;
      node.spaceBefore = false;
    },
  });
  const stripped = doc.toString({ lineWidth: 0 });
  // The deployment must run the spec that was validated: a difference is a bug here, not the user's.
  if (!isDeepStrictEqual(parseYaml(stripped), parseYaml(text))) {
    throw new Error('deployedSpecText: the spec without its comments parses to a different value');
  }
  return stripped;
}
