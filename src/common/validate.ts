import type { z } from 'zod';
import { ValidationError } from '../errors.js';

/** Parses `input` with a zod schema and turns every issue into one ValidationError message. */
export function validate<T extends z.ZodType>(schema: T, input: unknown, what: string): z.infer<T> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const problems = result.error.issues.map((i) => {
    const path = i.path.length ? i.path.join('.') : what;
    return `${path}: ${i.message}`;
  });
  throw new ValidationError(`Invalid ${what}: ${problems.join('; ')}`);
}

/**
 * True when `value` nests objects and arrays deeper than `max` levels (top level = 1). Walks
 * without recursion, so that a hostile document cannot exhaust the stack before it is refused.
 */
export function exceedsJsonDepth(value: unknown, max: number): boolean {
  const stack: Array<{ v: unknown; depth: number }> = [{ v: value, depth: 1 }];
  for (let item = stack.pop(); item; item = stack.pop()) {
    const { v, depth } = item;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === 'object') stack.push({ v: child, depth: depth + 1 });
    }
  }
  return false;
}
