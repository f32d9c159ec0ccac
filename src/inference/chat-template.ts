/**
 * ChatML chat template of the built-in model, in the style of Qwen's: tools are listed in the system turn, assistant
 * tool calls are `<tool_call>` blocks holding `{"name", "arguments"}` JSON, tool results go back in a user turn as
 * `<tool_response>` blocks. It uses only constructs that both llama.cpp's Jinja engine and @huggingface/jinja support.
 */
export const CHATML_TOOLS_TEMPLATE = [
  "{%- if tools %}",
  "{{- '<|im_start|>system\\n' }}",
  "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}",
  "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}",
  "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}",
  "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}",
  "{%- elif messages[0].role == 'system' %}",
  "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}",
  "{%- endif %}",
  "{%- for message in messages %}",
  "{%- if message.role == 'system' and loop.first %}",
  "{%- elif message.role == 'user' or message.role == 'system' %}",
  "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}",
  "{%- elif message.role == 'assistant' %}",
  "{{- '<|im_start|>assistant' }}",
  "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}",
  "{%- if message.tool_calls %}",
  "{%- for tool_call in message.tool_calls %}",
  "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}",
  "{{- '\\n<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' }}",
  "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}",
  "{{- '}\\n</tool_call>' }}",
  "{%- endfor %}",
  "{%- endif %}",
  "{{- '<|im_end|>\\n' }}",
  "{%- elif message.role == 'tool' %}",
  "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}",
  "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}",
  "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}",
  "{%- endif %}",
  "{%- endfor %}",
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
].join("\n");
