import { postgresFixture } from './incremental/fixture.js';
import { schemaChangeScenarios } from './incremental/schema-scenarios.js';

schemaChangeScenarios('postgres', () => postgresFixture('schema_pg'));
