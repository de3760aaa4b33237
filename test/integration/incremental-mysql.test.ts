import { privateMysqlDatabase } from '../harness/mysql.js';
import { mysqlFixture } from './incremental/fixture.js';
import { incrementalScenarios } from './incremental/scenarios.js';

// A private server: the late-commit scenarios assert exactly which rows the bound lets through,
// and on the shared server other files' transactions, and their reads that keep INNODB_TRX's
// cache stale, moved the bound (harness/mysql.ts, privateMysqlDatabase).
incrementalScenarios('mariadb', () => mysqlFixture('inc_my', privateMysqlDatabase));
