/**
 * Reading the served OpenAPI document in the suites that check the server against it: its schema
 * shape, and an ajv instance that knows the document's components (OpenAPI 3.0's `nullable` turned
 * into JSON Schema), so one schema of the document can be compiled with its references; and
 * fast-check generators of the values a schema describes.
 */
import AjvModule from 'ajv';
import addFormatsModule from 'ajv-formats';
import fc from 'fast-check';

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

/** What a suite decides in the values generated for the document's schemas. */
export interface ArbitraryRules {
  /** A schema with its `$ref` followed. */
  resolve(schema: Schema | undefined): Schema;
  /** Ids of the records the suite made, offered beside random integers in range. */
  ids(): number[];
  /** A string that is not a date or a date-time (those are the same for every suite). */
  text(schema: Schema): fc.Arbitrary<unknown>;
  /** The decimal places a number is rounded to. */
  places(schema: Schema): number;
  /** An `allOf` takes its first member (without it, such a schema is generated as a loose object). */
  allOf?: boolean;
}

const someDate = () => fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true });

/** Generators of a schema's values and of an object schema's records, under a suite's rules. */
export function schemaArbitraries(rules: ArbitraryRules) {
  function valueArb(schemaIn: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
    const s = rules.resolve(schemaIn);
    let arb: fc.Arbitrary<unknown>;
    if (s.oneOf?.length) arb = fc.oneof(...s.oneOf.map((x) => valueArb(x, depth + 1)));
    else if (rules.allOf && s.allOf?.length) arb = valueArb(s.allOf[0], depth + 1);
    else if (s.enum?.length) arb = fc.constantFrom(...s.enum);
    else if (s.type === 'string') {
      if (s.format === 'date-time') arb = someDate().map((d) => d.toISOString().slice(0, 19) + '+00:00');
      else if (s.format === 'date') arb = someDate().map((d) => d.toISOString().slice(0, 10));
      else arb = rules.text(s);
    } else if (s.type === 'integer') {
      const min = s.minimum ?? -1000;
      const max = s.maximum ?? 1000;
      const ids = rules.ids().filter((id) => id >= min && id <= max);
      arb = fc.oneof(fc.integer({ min, max: Math.min(max, min + 100000) }), ...(ids.length ? [fc.constantFrom(...ids)] : []));
    } else if (s.type === 'number') {
      const places = rules.places(s);
      arb = fc
        .double({ min: s.minimum ?? -1e6, max: Math.min(s.maximum ?? 1e6, 1e9), noNaN: true, noDefaultInfinity: true })
        .map((n) => Math.round(n * 10 ** places) / 10 ** places);
    } else if (s.type === 'boolean') arb = fc.boolean();
    else if (s.type === 'array') arb = fc.array(valueArb(s.items, depth + 1), { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 3, 3) });
    else if (s.properties && depth < 4) arb = objectArb(s, depth + 1);
    else arb = fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean()), { maxKeys: 3 });
    return s.nullable ? fc.oneof({ weight: 4, arbitrary: arb }, { weight: 1, arbitrary: fc.constant(null) }) : arb;
  }

  function objectArb(s: Schema, depth: number): fc.Arbitrary<Record<string, unknown>> {
    const props = s.properties ?? {};
    const required = new Set(s.required ?? []);
    return fc.record(Object.fromEntries(Object.entries(props).map(([k, v]) => [k, valueArb(v, depth)])), {
      requiredKeys: Object.keys(props).filter((k) => required.has(k)),
    });
  }

  return { valueArb, objectArb };
}
