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
