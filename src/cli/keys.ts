import { createApiKey, listApiKeys, revokeApiKey } from "../auth/keys.js";
import { UsageError, withDatabase, type Command } from "./command.js";

export const keysCommand: Command = (args) =>
  withDatabase(args.config, async (db) => {
    const [sub, id] = args.words;
    if (sub === "create") {
      const entity = args.options.entity;
      if (typeof entity !== "string") throw new UsageError("keys create needs --entity NAME");
      const created = await createApiKey(db, entity, String(args.options.label ?? ""));
      args.out(`${created.key}\n`);
      args.err(`created ${created.id} for entity '${entity}'; the key above is shown only this once\n`);
      return 0;
    }
    if (sub === "list") {
      for (const k of await listApiKeys(db)) {
        args.out(`${k.id}\t${k.entity}\t${k.revoked_at ? "revoked" : "active"}\tcreated ${k.created_at}\tlast used ${k.last_used_at ?? "never"}\t${k.label}\n`);
      }
      return 0;
    }
    if (sub === "revoke") {
      if (!id) throw new UsageError("keys revoke needs a key id (see 'gyre keys list')");
      if (!(await revokeApiKey(db, id))) {
        args.err(`no active key with id ${id}\n`);
        return 1;
      }
      args.out(`revoked ${id}\n`);
      return 0;
    }
    throw new UsageError(`unknown keys command '${sub ?? ""}'`);
  });
