import { mysqlFixture } from './incremental/fixture.js';
import { incrementalScenarios } from './incremental/scenarios.js';

incrementalScenarios('mariadb', () => mysqlFixture('inc_my'));
