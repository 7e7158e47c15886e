import type { Migration } from '../migrator.js';
import { m001Initial } from './001-initial.js';

/** Every migration, in order. Append only: never edit one that has shipped. */
export const MIGRATIONS: readonly Migration[] = [m001Initial];
