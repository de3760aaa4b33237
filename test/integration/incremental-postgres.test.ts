import { incrementalScenarios } from './incremental/scenarios.js';
import { postgresFixture } from './incremental/fixture.js';

incrementalScenarios('postgres', () => postgresFixture('inc_pg'));
