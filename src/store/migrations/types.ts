import type { Knex } from "knex";

/** One schema step. Each capability owns its migration files; `index.ts` lists them in order. */
export interface Migration {
  name: string;
  up(db: Knex): Promise<void>;
  down(db: Knex): Promise<void>;
}
