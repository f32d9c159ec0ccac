import { AppError } from "../errors.js";
import type { Logger } from "../logging.js";
import { appErrorReply, plainReply, type ErrorStyle } from "./error-shapes.js";

/**
 * Server-sent events as OpenAI streams them: `data: <json>` per chunk, then `data: [DONE]`. A failure after the
 * stream started can no longer change the status, so it is sent as a last `data: {"error": …}` event.
 */
export async function* sseEvents(chunks: AsyncIterable<unknown>, style: ErrorStyle, logger: Logger): AsyncGenerator<string> {
  try {
    for await (const chunk of chunks) yield `data: ${JSON.stringify(chunk)}\n\n`;
    yield "data: [DONE]\n\n";
  } catch (err) {
    const reply = err instanceof AppError ? appErrorReply(style, err) : plainReply(style, 500, "Internal server error.");
    if (!(err instanceof AppError)) logger.error({ err: { message: (err as Error).message } }, "stream failed");
    yield `data: ${JSON.stringify(reply.body)}\n\n`;
  }
}
