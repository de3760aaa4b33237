/**
 * `fetch` for `file://` URLs, so readers that only speak HTTP (icebird, over hyparquet) read a
 * local lake as they would read a bucket: the whole file with status 200 (hyparquet then slices
 * it itself), 404 when it is missing. Other URLs go to the real `fetch`. Installed around one
 * call (`withFileFetch`), then the original is back.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/** Runs `fn` with `globalThis.fetch` also answering `file://` URLs from disk. */
export async function withFileFetch<T>(fn: () => Promise<T>): Promise<T> {
  const real = globalThis.fetch;
  globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith('file:')) return real(input, init);
    try {
      const bytes = await readFile(fileURLToPath(url));
      return new Response(init?.method === 'HEAD' ? null : bytes, {
        status: 200,
        headers: { 'content-length': String(bytes.length) },
      });
    } catch {
      return new Response(null, { status: 404 });
    }
  }) as typeof fetch;
  try {
    return await fn();
  } finally {
    globalThis.fetch = real;
  }
}
