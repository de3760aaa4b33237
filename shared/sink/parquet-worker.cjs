// The Parquet encoder's worker thread (plain CommonJS so it runs unchanged from a checkout, under
// tsx or vitest, and as its own esbuild bundle beside the Lambda's index.js). It receives an
// Arrow IPC stream and writer options and answers with the Parquet bytes, so the wasm encode of
// page N runs on a second core while the main thread reads and decodes page N+1.
// Owns nothing else: no I/O, no state; one message in, one message out.
const { parentPort } = require('node:worker_threads');
const { Compression, Table, WriterPropertiesBuilder, writeParquet } = require('parquet-wasm');

const CODECS = { zstd: Compression.ZSTD, snappy: Compression.SNAPPY };

parentPort.on('message', (msg) => {
  try {
    let builder = new WriterPropertiesBuilder()
      .setCompression(CODECS[msg.compression])
      .setMaxRowGroupSize(msg.maxRowGroupRows);
    for (const column of msg.plainColumns) builder = builder.setColumnDictionaryEnabled(column, false);
    if (msg.keyValueMetadata)
      builder = builder.setKeyValueMetadata(new Map(Object.entries(msg.keyValueMetadata)));
    const bytes = writeParquet(Table.fromIPCStream(msg.ipc), builder.build());
    parentPort.postMessage({ id: msg.id, bytes }, [bytes.buffer]);
  } catch (e) {
    parentPort.postMessage({ id: msg.id, error: e instanceof Error ? e.message : String(e) });
  }
});
