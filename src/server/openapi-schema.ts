/** The parts of an OpenAPI document its completion (openapi-document.ts) reads and writes. */
export type Schema = Record<string, unknown> & { type?: string; properties?: Record<string, Schema>; items?: Schema; required?: string[]; $ref?: string };
export type Operation = {
  description?: string;
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean; schema?: Schema; description?: string }[];
  requestBody?: unknown;
  responses: Record<string, { description?: string; content?: Record<string, { schema?: Schema }> }>;
  'x-permission'?: string;
  'x-also-requires'?: string[];
};

/** The component name a local `$ref` points to. */
export const refName = (ref: string) => ref.slice(ref.lastIndexOf('/') + 1);

/** An operation's request body, by media type. */
export const bodyContents = (op: Operation): Record<string, { schema?: Schema }> =>
  (op.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined)?.content ?? {};

/** A request body's class (its name is the schema's component name). */
export type BodyClass = abstract new (...args: never[]) => unknown;
