import { postgresFixture } from './incremental/fixture.js';
import { incrementalScenarios } from './incremental/scenarios.js';

incrementalScenarios('postgres', () => postgresFixture('inc_pg'));
