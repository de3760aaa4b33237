// The Parquet encoder's worker thread (plain CommonJS so it runs unchanged from a checkout, under
// tsx or vitest, and as its own esbuild bundle beside the Lambda's index.js). For each encode it
// receives the writer settings, then pulls the object's Arrow IPC slices from the main thread one
// at a time into parquet-wasm's streaming writer, and answers with the Parquet bytes, so the wasm
// encode of page N runs on a second core while the main thread reads and decodes page N+1, and
// the encoder holds one slice at a time (shared/sink/parquet-writer.ts says why).
// Owns nothing else: no I/O, no state beyond the encodes in flight.
const { parentPort } = require('node:worker_threads');
const wasm = require('parquet-wasm');
const { compressPages, nativeCompressor } = require('./parquet-pages.cjs');
const { FlatWriter, templateFor } = require('./parquet-flat.cjs');
const { writerProperties } = require('./parquet-properties.cjs');

const { Table, transformParquetStream } = wasm;

/** Encode id -> the resolver waiting for its next slice. */
const waiting = new Map();

/** Asks the main thread for the next slice of encode `id`: { ipc } or { done: true }. */
function pull(id) {
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    parentPort.postMessage({ id, pull: true });
  });
}

/** Encode `id` with tidemark's own writer: the slices arrive as column arrays (FlatSlice). */
async function encodeFlat(id, settings, schemaIpc) {
  let bytes;
  try {
    const writer = new FlatWriter(templateFor(schemaIpc), {
      ...settings,
      compressor: nativeCompressor(settings.nativeCodec),
    });
    for (;;) {
      const next = await pull(id);
      if (next.done) break;
      writer.add(next.flat);
    }
    bytes = writer.finish();
  } catch (e) {
    // The main thread encodes the object again in parquet-wasm, and warns.
    waiting.delete(id);
    parentPort.postMessage({ id, flatFailed: e instanceof Error ? e.message : String(e) });
    return;
  }
  parentPort.postMessage({ id, bytes }, [bytes.buffer]);
}

async function encode(id, settings) {
  try {
    const slices = new ReadableStream(
      {
        async pull(controller) {
          const next = await pull(id);
          if (next.done) {
            controller.close();
            return;
          }
          const table = Table.fromIPCStream(next.ipc);
          for (const batch of table.recordBatches()) controller.enqueue(batch);
          table.free();
        },
      },
      { highWaterMark: 0 },
    );
    const parts = [];
    let length = 0;
    for await (const part of await transformParquetStream(slices, writerProperties(wasm, settings))) {
      parts.push(part);
      length += part.length;
    }
    let bytes = new Uint8Array(length);
    let at = 0;
    for (const part of parts) {
      bytes.set(part, at);
      at += part.length;
    }
    parts.length = 0;
    if (settings.native) {
      try {
        bytes = compressPages(bytes, nativeCompressor(settings.nativeCodec));
      } catch (e) {
        // A layout the page rewrite does not know: the main thread encodes again, wasm-compressed.
        parentPort.postMessage({ id, nativeFailed: e instanceof Error ? e.message : String(e) });
        return;
      }
    }
    parentPort.postMessage({ id, bytes }, [bytes.buffer]);
  } catch (e) {
    waiting.delete(id);
    parentPort.postMessage({ id, error: e instanceof Error ? e.message : String(e) });
  }
}

parentPort.on('message', (msg) => {
  if (msg.warm) {
    // Before a run's first page (parquet-writer.ts warmEncoder): the template is cached for the
    // encodes to come. A failure here is met, and reported, by the first encode.
    try {
      templateFor(msg.warm);
    } catch {}
    return;
  }
  if (msg.settings) {
    if (msg.settings.flat) encodeFlat(msg.id, msg.settings, msg.schemaIpc);
    else encode(msg.id, msg.settings);
    return;
  }
  const resolve = waiting.get(msg.id);
  waiting.delete(msg.id);
  resolve?.(msg);
});
