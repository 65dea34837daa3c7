// Three turns of the Vercel AI SDK's default OpenAI model (the Responses API, store on) with a
// function tool, against CONTEXTGATE_BASE_URL. Each turn resends the conversation as the SDK
// keeps it (its earlier output as item_reference items). Prints one JSON line per turn.
// The bodies it POSTs to /responses are appended to SENT_LOG, one JSON line each.
import { appendFileSync } from "node:fs";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, isStepCount, jsonSchema, tool } from "ai";

const recordingFetch = async (url, init) => {
  if (String(url).endsWith("/responses") && init?.method === "POST") {
    appendFileSync(process.env.SENT_LOG, `${init.body}\n`);
  }
  return fetch(url, init);
};
const openai = createOpenAI({
  baseURL: process.env.CONTEXTGATE_BASE_URL,
  apiKey: process.env.CONTEXTGATE_API_KEY ?? "sk-ai-sdk",
  fetch: recordingFetch,
});
const model = openai(process.env.MODEL ?? "gpt-4o-mini");
const tools = {
  get_weather: tool({
    description: "The weather in a city",
    inputSchema: jsonSchema({
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    }),
    execute: async ({ city }) => `sunny, 21C in ${city}`,
  }),
};

const messages = [];
for (const ask of JSON.parse(process.env.ASKS)) {
  messages.push({ role: "user", content: ask });
  const result = await generateText({ model, tools, messages, stopWhen: isStepCount(4) });
  // every step's messages (v7; `response.messages` holds the last step's only)
  messages.push(...(result.responseMessages ?? result.response.messages));
  console.log(
    JSON.stringify({
      text: result.text,
      steps: result.steps.length,
      toolResults: result.steps.flatMap((step) => step.toolResults.map((r) => r.output)),
    }),
  );
}
