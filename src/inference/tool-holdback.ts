import { TOOL_CALL_OPEN } from "./tool-calls.js";

/**
 * While streaming, content is passed on as it comes, except from the first `<tool_call>` on: that part is kept until the
 * end, when it is parsed into tool calls. A suffix that may be the start of the tag is held until it is decided.
 */
export class ToolCallHoldback {
  private buffer = "";
  private capturing = false;

  push(text: string): string {
    this.buffer += text;
    if (this.capturing) return "";
    const open = this.buffer.indexOf(TOOL_CALL_OPEN);
    if (open >= 0) {
      this.capturing = true;
      const emit = this.buffer.slice(0, open);
      this.buffer = this.buffer.slice(open);
      return emit;
    }
    let hold = 0;
    for (let len = Math.min(TOOL_CALL_OPEN.length - 1, this.buffer.length); len > 0; len--) {
      if (TOOL_CALL_OPEN.startsWith(this.buffer.slice(this.buffer.length - len))) {
        hold = len;
        break;
      }
    }
    const emit = this.buffer.slice(0, this.buffer.length - hold);
    this.buffer = this.buffer.slice(this.buffer.length - hold);
    return emit;
  }

  /** The held text, at the end of the generation. */
  held(): string {
    return this.buffer;
  }
}
