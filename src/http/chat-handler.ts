import type { ChatCaller, ChatService } from "../inference/chat-service.js";
import type { ChatCompletionRequest } from "../inference/types.js";
import type { Logger } from "../logging.js";
import type { ErrorStyle } from "./error-shapes.js";
import type { OperationHandler, OperationInput } from "./service-app.js";
import { sseEvents } from "./sse.js";

/** `POST …/chat/completions` for either service: the same request, streamed or not. */
export function chatCompletionHandler(
  chat: ChatService,
  style: ErrorStyle,
  logger: Logger,
  callerOf: (input: OperationInput) => ChatCaller,
): OperationHandler {
  return async (input) => {
    const request = input.body as ChatCompletionRequest;
    const caller = callerOf(input);
    if (request.stream) {
      // Errors before the first chunk (unknown model, bad request, full queue) still get their status code.
      const chunks = await chat.stream(caller, request, input.signal);
      const iterator = chunks[Symbol.asyncIterator]();
      const first = await iterator.next();
      const rest = { [Symbol.asyncIterator]: () => iterator };
      return { stream: sseEvents(prepend(first, rest), style, logger), contentType: "text/event-stream" };
    }
    return { body: await chat.complete(caller, request, input.signal) };
  };
}

async function* prepend<T>(first: IteratorResult<T>, rest: AsyncIterable<T>): AsyncGenerator<T> {
  if (first.done) return;
  yield first.value;
  yield* rest;
}
