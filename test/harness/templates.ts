/**
 * Where the harness keeps freshly initialised data directories to copy instead of running
 * initdb / mariadb-install-db each time (shared/local/template-dir.ts); keyed by binary and
 * settings, so an upgrade builds new ones.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const TEMPLATE_ROOT = join(tmpdir(), 'tidemark-templates');
