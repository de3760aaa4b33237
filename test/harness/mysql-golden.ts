/**
 * The golden table of MySQL/MariaDB types: a column of every type docs/types.md (MySQL section)
 * maps, and four rows of their edge values (integer limits signed and unsigned, DECIMAL(38,10)
 * and DECIMAL(65,30), FLOAT/DOUBLE, BIT, YEAR, DATE, DATETIME(6), TIMESTAMP(6), zero dates, TIME
 * below zero and past 24 h, utf8mb4 emoji and latin1 text, BINARY/BLOB, JSON, ENUM, SET; the
 * generated columns follow from the others). The batch path's golden test
 * (integration/mysql-types.test.ts) and the binlog's every-type test (integration/mysql-cdc.test.ts)
 * load the same rows. Inserting them needs a session `sql_mode = ''` (zero dates) and
 * `time_zone = '+00:00'`.
 */

/** Per column: name, MySQL DDL, the DuckDB type read back from Parquet, the Glue type. */
export const GOLDEN_COLUMNS: readonly [name: string, ddl: string, duckdb: string, glue: string][] = [
  ['id', 'INT PRIMARY KEY', 'INTEGER', 'int'],
  ['ti', 'TINYINT', 'TINYINT', 'tinyint'],
  ['tb', 'TINYINT(1)', 'TINYINT', 'tinyint'],
  ['tu', 'TINYINT UNSIGNED', 'SMALLINT', 'smallint'],
  ['si', 'SMALLINT', 'SMALLINT', 'smallint'],
  ['su', 'SMALLINT UNSIGNED', 'INTEGER', 'int'],
  ['mi', 'MEDIUMINT', 'INTEGER', 'int'],
  ['mu', 'MEDIUMINT UNSIGNED', 'INTEGER', 'int'],
  ['i', 'INT', 'INTEGER', 'int'],
  ['iu', 'INT UNSIGNED', 'BIGINT', 'bigint'],
  ['bi', 'BIGINT', 'BIGINT', 'bigint'],
  ['bu', 'BIGINT UNSIGNED', 'DECIMAL(20,0)', 'decimal(20,0)'],
  ['d38', 'DECIMAL(38,10)', 'DECIMAL(38,10)', 'decimal(38,10)'],
  ['d65', 'DECIMAL(65,30)', 'VARCHAR', 'string'],
  ['f', 'FLOAT', 'DOUBLE', 'double'],
  ['db', 'DOUBLE', 'DOUBLE', 'double'],
  ['bt', 'BIT(10)', 'BLOB', 'binary'],
  ['y', 'YEAR', 'SMALLINT', 'smallint'],
  ['dt', 'DATE', 'DATE', 'date'],
  ['dtm', 'DATETIME(6)', 'TIMESTAMP', 'timestamp'],
  ['ts', 'TIMESTAMP(6) NULL', 'TIMESTAMP WITH TIME ZONE', 'timestamp'],
  ['tm', 'TIME(6)', 'VARCHAR', 'string'],
  ['vc', 'VARCHAR(20)', 'VARCHAR', 'string'],
  ['l1', 'VARCHAR(20) CHARACTER SET latin1', 'VARCHAR', 'string'],
  ['bn', 'BINARY(3)', 'BLOB', 'binary'],
  ['bl', 'BLOB', 'BLOB', 'binary'],
  ['j', 'JSON', 'VARCHAR', 'string'],
  ['e', "ENUM('sad','ok')", 'VARCHAR', 'string'],
  ['st', "SET('x','y','z')", 'VARCHAR', 'string'],
  ['gv', 'BIGINT AS (i * 2) VIRTUAL', 'BIGINT', 'bigint'],
  ['gs', "VARCHAR(30) AS (CONCAT(vc, '!')) STORED", 'VARCHAR', 'string'],
];

/** The columns GOLDEN_ROWS sets (every one but the generated `gv` and `gs`), as an insert lists them. */
export const GOLDEN_INSERT_COLUMNS =
  'id, ti, tb, tu, si, su, mi, mu, i, iu, bi, bu, d38, d65, f, db, bt, y, dt, dtm, ts, tm, vc, l1, bn, bl, j, e, st';

/** The four golden rows (ids 1 to 4) as an insert's VALUES list, in GOLDEN_INSERT_COLUMNS order. */
export const GOLDEN_ROWS = `
  (1, -128, 0, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
   '-9999999999999999999999999999.9999999999', '-99999999999999999999999999999999999.999999999999999999999999999999',
   -3.4e38, -1.7976931348623157e308, b'0', 1901, '1000-01-01', '1000-01-01 00:00:00.000000', '1970-01-01 00:00:01.000000',
   '-838:59:59.000000', '', '', X'000000', X'', '[]', 'sad', ''),
  (2, 127, 1, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
   '9999999999999999999999999999.9999999999', '0.000000000000000000000000000001',
   16777217, 5e-324, b'1111111111', 2155, '9999-12-31', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999',
   '838:59:59.999999', '😀 ünï', 'café €ÿ', X'ff0102', X'00ff', '{"a": 12345678901234567890}', 'ok', 'x,z'),
  (3, 0, NULL, 1, 0, 1, 0, 1, 0, 1, 9007199254740993, 9007199254740993, '0.0000000001', '-0.000000000000000000000000000001',
   0.1, 0.1, b'1', 0, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '25:00:00.000001', 'a''b\\\\c', NULL, NULL, NULL,
   'null', NULL, NULL),
  (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '1969-12-31',
   '1969-12-31 23:59:59.999999', NULL, '-00:00:00.000001', NULL, NULL, NULL, NULL, NULL, NULL, NULL)`;
