/**
 * The byte side of a page (shared/drivers/page.ts): when PageBudget says full, and how many rows
 * one statement of a page asks for (rowsToAsk), which decides how often a statement has to be
 * stopped mid-way (costly) or continued (cheap).
 */
import { describe, expect, it } from 'vitest';
import type { TableRef } from '../../shared/contracts/source.js';
import { PageBudget, rowsToAsk } from '../../shared/drivers/page.js';

const table: TableRef = { source: 'public.t', target: 'public.t', primaryKey: ['id'] };
const req = (pageBytes?: number, maxRowBytes?: number) => ({
  table,
  cursorColumn: 'u',
  after: '',
  pageSize: 100,
  posPrefix: 'i0.',
  ordinalBase: 0,
  ...(pageBytes !== undefined ? { pageBytes } : {}),
  ...(maxRowBytes !== undefined ? { maxRowBytes } : {}),
});

describe('PageBudget', () => {
  it('is full from the first row that reaches pageBytes, and returns each row own bytes', () => {
    const b = new PageBudget(req(100, 1000));
    expect(b.add(40)).toBe(40);
    expect(b.full).toBe(false);
    expect(b.add(99)).toBe(59);
    expect(b.full).toBe(false);
    expect(b.add(100)).toBe(1);
    expect(b.full).toBe(true);
    expect(b.maxRowBytes).toBe(1000);
  });

  it('has no limits without pageBytes / maxRowBytes, and refuses invalid ones', () => {
    const b = new PageBudget(req());
    b.add(2 ** 40);
    expect(b.full).toBe(false);
    expect(b.maxRowBytes).toBe(Number.POSITIVE_INFINITY);
    expect(() => new PageBudget(req(0))).toThrow(/pageBytes must be a positive integer/);
    expect(() => new PageBudget(req(10, 1.5))).toThrow(/maxRowBytes must be a positive integer/);
  });
});

describe('rowsToAsk', () => {
  it('asks for every row pageSize allows without a budget or a size seen', () => {
    expect(rowsToAsk(new PageBudget(req()), 100, 10, 0)).toBe(100);
    expect(rowsToAsk(new PageBudget(req(1000)), 100, undefined, 0)).toBe(100);
  });

  it('asks for the rows the budget still holds at the size seen, at least one and at most what is left', () => {
    const b = new PageBudget(req(1000));
    expect(rowsToAsk(b, 100, 300, 0)).toBe(4); // the 4th row of 300 reaches 1000
    b.add(900);
    expect(rowsToAsk(b, 100, 300, 0)).toBe(1);
    expect(rowsToAsk(new PageBudget(req(1000)), 3, 1, 0)).toBe(3);
  });

  it('at least doubles the previous statement, so a page after one huge row needs few statements', () => {
    const b = new PageBudget(req(1000));
    b.add(990);
    expect(rowsToAsk(b, 100, 500, 8)).toBe(16);
    expect(rowsToAsk(b, 10, 500, 8)).toBe(10);
  });
});
