// The parquet-wasm writer properties of one encode's settings, built alike on the main thread
// (parquet-writer.ts) and in the encode worker (parquet-worker.cjs). Plain CommonJS so the worker
// requires it unchanged; parquet-wasm is passed in, never required here, because the main thread
// loads it lazily (parquet-writer.ts `parquetWasm`: it costs every run ~20 ms of start-up).
// Owns: the codec and writer-version tables and the properties built from them. No I/O.

/** The codecs by name (parquet-wasm's `Compression` names). */
const CODECS = { zstd: 'ZSTD', snappy: 'SNAPPY' };
/** arrow-rs writer version of each lake format. */
const WRITER_VERSIONS = { 1: 'V1', 2: 'V2' };

/** parquet-wasm writer properties of `s` (`native`: parquet-wasm writes UNCOMPRESSED, Node's zlib compresses). */
function writerProperties(wasm, s) {
  const { Compression, EnabledStatistics, WriterPropertiesBuilder, WriterVersion } = wasm;
  let builder = new WriterPropertiesBuilder()
    .setCompression(s.native ? Compression.UNCOMPRESSED : Compression[CODECS[s.compression]])
    .setWriterVersion(WriterVersion[WRITER_VERSIONS[s.format]])
    .setMaxRowGroupSize(s.maxRowGroupRows)
    .setMaxRowGroupBytes(s.maxRowGroupBytes)
    .setDictionaryPageSizeLimit(s.dictionaryPageBytes);
  for (const column of s.plainColumns) builder = builder.setColumnDictionaryEnabled(column, false);
  for (const column of s.noStatisticsColumns)
    builder = builder.setColumnStatisticsEnabled(column, EnabledStatistics.None);
  if (s.keyValueMetadata) builder = builder.setKeyValueMetadata(new Map(Object.entries(s.keyValueMetadata)));
  return builder.build();
}

module.exports = { CODECS, writerProperties };
