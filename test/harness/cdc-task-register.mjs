// A TIDEMARK_REGISTER module (functions/cdc/main.ts) for the BUNDLED CDC task's test: registers
// the scripted source with the bundle's own registry.
//
// The bundle runs under plain `node`; only this test-only module needs TypeScript (the scripted
// source is test/harness/*.ts, which a bundle cannot include), so it loads that one file through
// tsx's tsImport, without registering tsx for the process. The scripted source builds its
// batches with `apache-arrow`; the bundle only recognizes its own Arrow (`api.arrow`), so a module
// hook maps every `apache-arrow` import of the files loaded here to the bundle's copy.
import { register as registerHooks } from 'node:module';
import { tsImport } from 'tsx/esm/api';

const HOOKS = `
let url;
export async function initialize(data) {
  const names = data.keys.filter((k) => /^[A-Za-z_$][\\w$]*$/.test(k) && k !== 'default');
  const source = 'const a = globalThis.__tidemarkHostArrow;\\n' +
    names.map((k) => 'export const ' + k + ' = a[' + JSON.stringify(k) + '];').join('\\n');
  url = 'data:text/javascript,' + encodeURIComponent(source);
}
export async function resolve(specifier, context, next) {
  if (specifier === 'apache-arrow') return { url, format: 'module', shortCircuit: true };
  return next(specifier, context);
}
`;

export async function register({ registerDriver, arrow }) {
  globalThis.__tidemarkHostArrow = arrow;
  registerHooks(`data:text/javascript,${encodeURIComponent(HOOKS)}`, import.meta.url, {
    data: { keys: Object.keys(arrow) },
  });
  const { scriptedFromEnv } = await tsImport('./cdc-task-source.ts', import.meta.url);
  registerDriver(scriptedFromEnv());
}
