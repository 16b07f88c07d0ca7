/**
 * Reading the served OpenAPI document in the suites that check the server against it: its schema
 * shape, and an ajv instance that knows the document's components (OpenAPI 3.0's `nullable` turned
 * into JSON Schema), so one schema of the document can be compiled with its references.
 */
import AjvModule from 'ajv';
import addFormatsModule from 'ajv-formats';

// CommonJS packages: the class / plugin is the module itself or its default.
const Ajv = ((AjvModule as unknown as { default?: unknown }).default ?? AjvModule) as typeof AjvModule.default;
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as typeof addFormatsModule.default;

export type DocAjv = InstanceType<typeof Ajv>;

export type Schema = {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  $ref?: string;
  enum?: unknown[];
  format?: string;
  pattern?: string;
  nullable?: boolean;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  allOf?: Schema[];
  oneOf?: Schema[];
  not?: Schema;
  'x-rules'?: string[];
  'x-references'?: string;
  'x-max-decimal-places'?: number;
};

/** The `$id` under which the document's components are registered with ajv. */
export const DOC_ID = 'https://salesflow.invalid/openapi.json';

/** OpenAPI 3.0's `nullable: true` (null besides what the rest allows) in JSON Schema terms, for ajv. */
export function jsonSchemaOf(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(jsonSchemaOf);
  if (!value || typeof value !== 'object') return value;
  const out = Object.fromEntries(
    Object.entries(value).map(([k, v]) => [
      k,
      k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([pk, pv]) => [pk, jsonSchemaOf(pv)])) : jsonSchemaOf(v),
    ]),
  );
  if (out.nullable !== true) return out;
  const { nullable: _, description, ...rest } = out;
  return { description, anyOf: [rest, { type: 'null' }] };
}

/** A deep copy of a schema of the document whose local references point into the components registered with ajv. */
export function anchored<T>(schema: T): T {
  return jsonSchemaOf(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', `"${DOC_ID}#/components/`))) as T;
}

/** ajv with the standard formats, `binary` (and `extraFormats`) taken as is, and the document's components registered. */
export function docAjv(components: unknown, extraFormats: string[] = []): DocAjv {
  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  for (const f of ['binary', ...extraFormats]) ajv.addFormat(f, true);
  ajv.addSchema({ $id: DOC_ID, components: jsonSchemaOf(components) });
  return ajv;
}
