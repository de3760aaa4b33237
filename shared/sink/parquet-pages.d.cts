// Types of parquet-pages.cjs (plain CommonJS so the encode worker requires it unchanged).

/** A page compressor: the Parquet codec it writes and the function that compresses one page. */
export interface PageCompressor {
  readonly codec: number;
  compress(bytes: Uint8Array): Uint8Array;
}

/** Node's native compressor for `codec`, or undefined when this Node has none (zstd before 22.15). */
export function nativeCompressor(codec: 'zstd' | 'snappy' | 'gzip'): PageCompressor | undefined;

/** Compresses every page of an UNCOMPRESSED Parquet file; throws on a layout it does not know. */
export function compressPages(file: Uint8Array, compressor: PageCompressor): Uint8Array;

/** A decoded Thrift compact struct: its fields in wire order. */
export interface ThriftStruct {
  fields: { id: number; type: number; value: unknown }[];
}
export function decodeStruct(bytes: Uint8Array, at: number): { struct: ThriftStruct; end: number };
export function encodeStruct(struct: ThriftStruct): Uint8Array;

export const CODEC: { readonly UNCOMPRESSED: 0; readonly GZIP: 2; readonly ZSTD: 6 };
