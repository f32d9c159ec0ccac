/**
 * The text the built-in model's tokenizer learns its merges from: plain English about conversations, tools and data,
 * plus the JSON and markup that chat transcripts contain, so common words and syntax become single tokens.
 */
export const TOKENIZER_CORPUS = `
The assistant is a helpful agent. It reads the question from the user, thinks about what the user wants, and answers
in a short and clear way. When the answer needs information from the outside world, the assistant calls a tool.
A tool has a name, a description and parameters. The parameters are a JSON object with properties, types and required
fields. The tool returns a result, and the assistant uses the result to write the final answer for the user.

User: What is the weather in Paris today?
Assistant: Let me check the weather for you. The weather in Paris is sunny, with a temperature of twenty degrees.
User: Can you search the documents for the report about sales in the last quarter?
Assistant: I found three documents. The report says that the sales grew by ten percent in the last quarter.
User: Please write a function that returns the sum of two numbers.
Assistant: Here is a function in Python: def add(a, b): return a + b. It takes two numbers and returns their sum.
User: Thank you! That was very helpful.
Assistant: You are welcome. Is there anything else I can help you with today?

The system message tells the assistant how to behave. The developer can give instructions, and the user asks
questions. Every message has a role and content. The roles are system, user, assistant and tool. A conversation is a
list of messages, and the model continues the conversation by writing the next message of the assistant.
{"role": "system", "content": "You are a helpful assistant."}
{"role": "user", "content": "Hello, how are you?"}
{"role": "assistant", "content": "I am fine, thank you. How can I help you?"}
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
{"name": "search", "arguments": {"query": "sales report", "limit": 10}}
{"type": "function", "function": {"name": "get_time", "description": "Get the current time", "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}
<tool_call>
{"name": "get_weather", "arguments": {"city": "London"}}
</tool_call>
<tool_response>
{"temperature": 18, "condition": "cloudy", "humidity": 0.7}
</tool_response>
[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 1000, 2024, 2025, 3.14, 0.5, -1, true, false, null]

Training a model means showing it examples and changing its weights so that it makes fewer mistakes. The loss measures
how wrong the model is. A lower loss is better. The learning rate controls how large each step is. A reward tells the
model whether an answer was good, and reinforcement learning raises the probability of answers with a high reward.
The agent observes the state of its environment, takes an action, and receives an observation and a reward. Over many
steps, the agent learns which actions lead to good results. Traces record every step, every message and every call.

Numbers and dates: one, two, three, four, five, six, seven, eight, nine, ten. Monday, Tuesday, Wednesday, Thursday,
Friday, Saturday, Sunday. January, February, March, April, May, June, July, August, September, October, November,
December. The time is ten o'clock in the morning. It's a good day. We'll see. They're here. I've done it. You'd know.

Code often looks like this: if (x > 0) { return x; } else { return -x; } for (let i = 0; i < n; i++) { total += i; }
const result = await fetch(url); console.log(result.status); print("hello world") import os, sys, json.
The file is at /home/user/data/report.txt and the server listens on http://localhost:8080/v1/chat/completions.
`;
