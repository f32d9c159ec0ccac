import { parseProjectId } from "../auth/projects.js";
import { searchMessages, type AgentSearchReq } from "../search/index.js";
import { UsageError, withDatabase, type Command } from "./command.js";

/** `gyre search "query" --project e/p`: the same search as the API, printed for people. */
export const searchCommand: Command = (args) =>
  withDatabase(args.config, async (db) => {
    const project = args.options.project;
    if (typeof project !== "string") throw new UsageError('search needs --project entity/project (and a query in quotes, or "" with filters)');
    parseProjectId(project, ["--project"]);
    const request: AgentSearchReq = {
      project_id: project,
      query: args.words.join(" "),
      trace_id: (args.options.trace as string | undefined) ?? null,
      conversation_id: (args.options.conversation as string | undefined) ?? null,
      roles: typeof args.options.roles === "string" ? (args.options.roles.split(",") as AgentSearchReq["roles"]) : null,
      limit: args.options.limit ? Number(args.options.limit) : 10,
      offset: 0,
      truncate_content: true,
    };
    const result = await searchMessages(db, request);
    args.out(`${result.total_conversations} conversation(s)\n`);
    for (const c of result.results) {
      args.out(`\n${c.conversation_id}  ${c.conversation_name || "(no name)"}  agent ${c.agent_name || "-"}  last ${c.last_activity}\n`);
      for (const m of c.matched_messages) {
        const text = m.content_preview.replace(/\s+/g, " ").slice(0, 160);
        args.out(`  ${m.started_at}  ${(m.role || "-").padEnd(11)} ${text}\n`);
      }
    }
    return 0;
  });
