/**
 * The Glue name mapping (shared/iceberg/glue-names.ts, docs/iceberg.md "Catalogs: glue"): every
 * target becomes names Glue and Athena accept, the two namings place targets as documented, and
 * two targets that land on one Glue table are refused with both named.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TidemarkError } from '../../shared/contracts/errors.js';
import {
  GLUE_NAME_MAX,
  glueIdentOf,
  glueName,
  glueNameCollisions,
  glueNamesOf,
} from '../../shared/iceberg/glue-names.js';

const GLUE_NAME = /^[a-z0-9_]+$/;

describe('glue names', () => {
  it('maps schema.table to database and table, with a prefix or one fixed database', () => {
    expect(glueIdentOf('public.orders')).toEqual({ namespace: 'public', name: 'orders' });
    expect(glueIdentOf('public.orders', { databasePrefix: 'tidemark_' })).toEqual({
      namespace: 'tidemark_public',
      name: 'orders',
    });
    expect(glueIdentOf('orders', { databasePrefix: 'lake_' })).toEqual({
      namespace: 'lake_default',
      name: 'orders',
    });
    expect(glueIdentOf('Sales.Order-Lines.v2', { database: 'Lake' })).toEqual({
      namespace: 'lake',
      name: 'sales_order_lines_v2',
    });
    expect(glueIdentOf('Sales.Order-Lines.v2')).toEqual({ namespace: 'sales', name: 'order_lines_v2' });
    expect(glueIdentOf('.orders')).toEqual({ namespace: 'default', name: 'orders' });
    expect(glueIdentOf('public.')).toEqual({ namespace: 'public', name: 'public_' });
  });

  it('gives every target names Glue and Athena accept', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 600, unit: 'binary' }),
        fc.oneof(
          fc.record({ database: fc.string({ minLength: 1, maxLength: 300 }) }),
          fc.record({ databasePrefix: fc.string({ maxLength: 300 }) }),
        ),
        (target, naming) => {
          const ident = glueIdentOf(target, naming);
          for (const name of [ident.namespace, ident.name]) {
            expect(name).toMatch(GLUE_NAME);
            expect(name.length).toBeLessThanOrEqual(GLUE_NAME_MAX);
          }
        },
      ),
    );
  });

  it('finds exactly the targets that share a Glue table, and refuses them naming both', () => {
    const long = 'x'.repeat(300);
    const targets = ['public.orders', 'Public.Orders', 'a.b-c', 'a.b_c', 'a.d', `s.${long}1`, `s.${long}2`];
    expect(glueNameCollisions(targets)).toEqual([
      { glue: 'public.orders', targets: ['public.orders', 'Public.Orders'] },
      { glue: 'a.b_c', targets: ['a.b-c', 'a.b_c'] },
      { glue: `s.${'x'.repeat(GLUE_NAME_MAX)}`, targets: [`s.${long}1`, `s.${long}2`] },
    ]);
    let thrown: unknown;
    try {
      glueNamesOf(targets);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(TidemarkError);
    expect((thrown as TidemarkError).code).toBe('GLUE_NAME_COLLISION');
    expect((thrown as Error).message).toContain('"public.orders" and "Public.Orders"');
    expect((thrown as Error).message).toContain('2 more');
    expect(glueNamesOf(['public.orders', 'a.d']).get('a.d')).toEqual({ namespace: 'a', name: 'd' });
  });

  it('refuses no targets whose Glue names differ (property: a collision is an equal mapping)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ minLength: 1, maxLength: 12 }), { maxLength: 8 }), (targets) => {
        const idents = targets.map((t) => glueIdentOf(t));
        const keys = idents.map((i) => `${i.namespace}.${i.name}`);
        const shared = new Set(keys.filter((k, i) => keys.indexOf(k) !== i));
        const found = glueNameCollisions(targets);
        expect(new Set(found.map((c) => c.glue))).toEqual(shared);
        for (const c of found) expect(c.targets).toEqual(targets.filter((_, i) => keys[i] === c.glue));
      }),
    );
  });

  it('lowercases and replaces, never anything else', () => {
    expect(glueName('Ab-C.d é')).toBe('ab_c_d__');
    expect(glueName('x'.repeat(400))).toHaveLength(GLUE_NAME_MAX);
  });
});
