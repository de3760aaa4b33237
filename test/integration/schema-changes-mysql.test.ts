import { mysqlFixture } from './incremental/fixture.js';
import { schemaChangeScenarios } from './incremental/schema-scenarios.js';

schemaChangeScenarios('mariadb', () => mysqlFixture('schema_my'));
