/**
 * The one logger. In Lambda/Fargate (or whenever stderr is not a TTY) every line is a JSON object
 * with `level`, `msg`, `time` and fields; on a TTY lines are short and human. Metrics are log lines
 * in CloudWatch Embedded Metric Format so they cost no extra API call.
 *
 * Every line goes to stderr, JSON included: stdout belongs to a command's results (`tidemark run
 * --json | jq` reads one summary object per table and nothing else). Lambda and ECS ship both
 * streams to CloudWatch Logs, where EMF lines are picked up from either.
 *
 * Never logs a secret: the message and every string in the fields pass through `redact`
 * (redact.ts), which hides secrets by shape and every secret the config registered. Metric lines
 * are not redacted: they hold only names from the code and identifiers from the spec, and a
 * password that happens to equal one must not break a CloudWatch dimension.
 */
import type { Code } from '../contracts/error-codes.js';
import { redact } from './redact.js';

export type Level = 'debug' | 'info' | 'warn' | 'error';
const LEVELS: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** A line's fields; its `code`, when it has one, is a listed code (shared/contracts/error-codes.ts). */
export type LogFields = Record<string, unknown> & { readonly code?: Code };

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Emits metrics (EMF when JSON). `dims` become CloudWatch dimensions. */
  metric(
    name: string,
    value: number,
    unit: 'Count' | 'Milliseconds' | 'Bytes' | 'Seconds',
    dims: Record<string, string>,
  ): void;
  child(fields: Record<string, unknown>): Logger;
}

export interface LoggerOptions {
  json?: boolean;
  level?: Level;
  /** Where lines go; defaults to process.stderr (human and JSON alike). */
  write?: (line: string) => void;
  fields?: Record<string, unknown>;
  /** Emit EMF metric lines; default: in Lambda/ECS or with TIDEMARK_METRICS=emf. */
  metrics?: boolean;
}

/** JSON.stringify replacer: every string redacted, bigints as text, errors as name/message/code. */
function jsonSafe(_key: string, v: unknown): unknown {
  if (typeof v === 'string') return redact(v);
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof Error)
    return { name: v.name, message: v.message, ...('code' in v ? { code: v.code } : {}) };
  return v;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const json = opts.json ?? !process.stderr.isTTY;
  const min = LEVELS[opts.level ?? (process.env.TIDEMARK_LOG_LEVEL as Level | undefined) ?? 'info'] ?? 20;
  const write = opts.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  const base = opts.fields ?? {};
  // EMF metrics only where CloudWatch collects them (Lambda, ECS) or when asked for.
  const metrics =
    opts.metrics ??
    (Boolean(process.env.AWS_LAMBDA_FUNCTION_NAME || process.env.ECS_CONTAINER_METADATA_URI_V4) ||
      process.env.TIDEMARK_METRICS === 'emf');

  const emit = (level: Level, msg: string, fields?: Record<string, unknown>) => {
    if (LEVELS[level] < min) return;
    const all = { ...base, ...fields };
    if (json) {
      write(JSON.stringify({ level, time: new Date().toISOString(), msg, ...all }, jsonSafe));
    } else {
      const extra = Object.entries(fields ?? {})
        .map(([k, v]) => `${k}=${typeof v === 'string' ? redact(v) : JSON.stringify(v, jsonSafe)}`)
        .join(' ');
      const tag = level === 'info' ? '' : `${level.toUpperCase()} `;
      write(`${tag}${redact(msg)}${extra ? `  ${extra}` : ''}`);
    }
  };

  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    metric(name, value, unit, dims) {
      if (!json || !metrics) return;
      write(
        JSON.stringify({
          _aws: {
            Timestamp: Date.now(),
            CloudWatchMetrics: [
              {
                Namespace: 'tidemark',
                Dimensions: [Object.keys(dims)],
                Metrics: [{ Name: name, Unit: unit }],
              },
            ],
          },
          ...dims,
          [name]: value,
        }),
      );
    },
    child: (fields) => createLogger({ ...opts, json, write, fields: { ...base, ...fields } }),
  };
}

/** A logger that drops everything (tests that assert on return values only). */
export const silentLogger: Logger = createLogger({ json: true, level: 'error', write: () => {} });
