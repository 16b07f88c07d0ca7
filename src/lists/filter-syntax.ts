/**
 * The filter language of every list, and how it is read: a tree of conditions over the fields a list
 * declares (its filter registry), given as JSON (`POST /api/<resource>/search`, or `filter={...}`)
 * or in the query-string form of Twenty's REST API (`filter=and(name[eq]:Ada,or(...))`).
 *
 * Nothing the client sends becomes SQL text: field names are looked up in the registry (which holds
 * the SQL expression), operators come from a fixed list, and every value is a bound parameter.
 *
 * Query-string grammar:
 *   filter    := node ("," node)*                      a top-level list is an implicit and(...)
 *   node      := group | condition
 *   group     := ("and" | "or") "(" node ("," node)* ")" | "not" "(" node ")"
 *   condition := field "[" op "]" (":" value)?         the value is omitted for isEmpty/isNotEmpty
 *   value     := list | scalar
 *   list      := "[" (scalar ("," scalar)*)? "]"       for in, nin and between
 *   scalar    := '"' (char | '\"' | '\\')* '"'         quoted: any text, backslash escapes " and \
 *              | bare                                  bare: up to the next , ) ] (no quotes, brackets or parentheses)
 */
export const FILTER_OPERATORS = [
  'eq',
  'neq',
  'gt',
  'gte',
  'lt',
  'lte',
  'in',
  'nin',
  'contains',
  'startsWith',
  'endsWith',
  'isEmpty',
  'isNotEmpty',
  'between',
] as const;
export type FilterOperator = (typeof FILTER_OPERATORS)[number];

export const FILTER_LIMITS = {
  /** Nesting of and/or/not groups. */
  maxDepth: 4,
  maxConditions: 50,
  maxListValues: 1000,
  maxValueLength: 1000,
  /** Characters of the query-string (or JSON) text of a filter. */
  maxTextLength: 65_536,
} as const;

// ---------------------------------------------------------------------------------------------
// The tree

export type FilterValue = string | number | boolean | null | (string | number | boolean | null)[];
export interface FilterCondition {
  field: string;
  op: string;
  value?: FilterValue;
}
export type FilterNode = FilterCondition | { and: FilterNode[] } | { or: FilterNode[] } | { not: FilterNode };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A filter that does not parse; compileFilter answers it as a 400 naming the problem. */
export class FilterSyntaxError extends Error {}

const fail = (message: string): never => {
  throw new FilterSyntaxError(message);
};

/** Checks the JSON form's shape (not the fields: see compileFilter) and answers it as a FilterNode. */
export function readJsonFilter(raw: unknown, depth = 0): FilterNode {
  if (depth > FILTER_LIMITS.maxDepth + 1) fail(`nests deeper than ${FILTER_LIMITS.maxDepth} groups`);
  if (!isObject(raw)) return fail('each node must be an object: {"field","op","value"}, {"and":[...]}, {"or":[...]} or {"not":{...}}');
  const keys = Object.keys(raw);
  if ('and' in raw || 'or' in raw) {
    const kind = 'and' in raw ? 'and' : 'or';
    if (keys.length !== 1) fail(`a group {"${kind}":[...]} takes no other property`);
    const list = raw[kind];
    if (!Array.isArray(list) || list.length === 0) fail(`"${kind}" must be a non-empty array of nodes`);
    if ((list as unknown[]).length > FILTER_LIMITS.maxConditions) fail(`"${kind}" has more than ${FILTER_LIMITS.maxConditions} nodes`);
    const nodes = (list as unknown[]).map((n) => readJsonFilter(n, depth + 1));
    return kind === 'and' ? { and: nodes } : { or: nodes };
  }
  if ('not' in raw) {
    if (keys.length !== 1) fail('a group {"not":{...}} takes no other property');
    return { not: readJsonFilter(raw.not, depth + 1) };
  }
  for (const k of keys)
    if (k !== 'field' && k !== 'op' && k !== 'value') fail(`unknown property "${k.slice(0, 40)}" in a condition (allowed: field, op, value)`);
  if (typeof raw.field !== 'string') fail('a condition needs "field" (a string)');
  if (typeof raw.op !== 'string') fail('a condition needs "op" (a string)');
  const cond: FilterCondition = { field: raw.field as string, op: raw.op as string };
  if ('value' in raw) {
    const v = raw.value;
    const scalar = (x: unknown) => x === null || typeof x === 'string' || typeof x === 'boolean' || (typeof x === 'number' && Number.isFinite(x));
    if (Array.isArray(v)) {
      if (v.length > FILTER_LIMITS.maxListValues) fail(`a list value has more than ${FILTER_LIMITS.maxListValues} items`);
      if (!v.every(scalar)) fail('list items must be strings, numbers, booleans or null');
      cond.value = v as (string | number | boolean | null)[];
    } else if (scalar(v)) cond.value = v as string | number | boolean | null;
    else fail('"value" must be a string, number, boolean, null or a list of those');
  }
  return cond;
}

// ----- query-string form

const BARE_STOP = new Set([',', '(', ')', '[', ']', '"']);

class Reader {
  pos = 0;
  constructor(readonly text: string) {}
  peek(): string {
    return this.text[this.pos] ?? '';
  }
  eat(ch: string): boolean {
    if (this.text[this.pos] === ch) {
      this.pos++;
      return true;
    }
    return false;
  }
  expect(ch: string): void {
    if (!this.eat(ch)) fail(`expected "${ch}" at position ${this.pos}${this.pos < this.text.length ? ` (found "${this.text[this.pos]}")` : ' (end of text)'}`);
  }
  skipSpace(): void {
    while (this.text[this.pos] === ' ') this.pos++;
  }
}

function readScalar(r: Reader): string {
  r.skipSpace();
  if (r.eat('"')) {
    let out = '';
    for (;;) {
      const ch = r.text[r.pos++];
      if (ch === undefined) fail('unterminated quoted value');
      if (ch === '"') break;
      if (ch === '\\') {
        const next = r.text[r.pos++];
        if (next !== '"' && next !== '\\') fail(`bad escape at position ${r.pos - 1}: only \\" and \\\\`);
        out += next;
      } else out += ch;
    }
    r.skipSpace();
    return out;
  }
  const start = r.pos;
  while (r.pos < r.text.length && !BARE_STOP.has(r.text[r.pos])) r.pos++;
  return r.text.slice(start, r.pos).trim();
}

function readQsValue(r: Reader): FilterValue {
  r.skipSpace();
  if (r.eat('[')) {
    const items: string[] = [];
    r.skipSpace();
    if (r.eat(']')) return items;
    do {
      items.push(readScalar(r));
      if (items.length > FILTER_LIMITS.maxListValues) fail(`a list value has more than ${FILTER_LIMITS.maxListValues} items`);
    } while (r.eat(','));
    r.expect(']');
    return items;
  }
  return readScalar(r);
}

function readQsNode(r: Reader, depth: number): FilterNode {
  if (depth > FILTER_LIMITS.maxDepth + 1) fail(`nests deeper than ${FILTER_LIMITS.maxDepth} groups`);
  r.skipSpace();
  const m = /^(and|or|not)\(/.exec(r.text.slice(r.pos, r.pos + 4));
  if (m) {
    r.pos += m[0].length;
    if (m[1] === 'not') {
      const child = readQsNode(r, depth + 1);
      r.skipSpace();
      r.expect(')');
      return { not: child };
    }
    const nodes: FilterNode[] = [];
    do {
      nodes.push(readQsNode(r, depth + 1));
      if (nodes.length > FILTER_LIMITS.maxConditions) fail(`a group has more than ${FILTER_LIMITS.maxConditions} nodes`);
      r.skipSpace();
    } while (r.eat(','));
    r.expect(')');
    return m[1] === 'and' ? { and: nodes } : { or: nodes };
  }
  const start = r.pos;
  while (r.pos < r.text.length && r.text[r.pos] !== '[' && !BARE_STOP.has(r.text[r.pos])) r.pos++;
  const field = r.text.slice(start, r.pos).trim();
  if (!field) fail(`expected a field name, and(, or( or not( at position ${start}`);
  r.expect('[');
  const opStart = r.pos;
  while (r.pos < r.text.length && r.text[r.pos] !== ']') r.pos++;
  const op = r.text.slice(opStart, r.pos);
  r.expect(']');
  r.skipSpace();
  const cond: FilterCondition = { field, op };
  if (r.eat(':')) cond.value = readQsValue(r);
  r.skipSpace();
  return cond;
}

/** Parses the query-string form (or, when it starts with `{`, the JSON form). */
export function parseFilterText(text: string): FilterNode {
  if (text.length > FILTER_LIMITS.maxTextLength) fail(`is longer than ${FILTER_LIMITS.maxTextLength} characters`);
  if (text.includes('\u0000')) fail('must not contain NUL characters');
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    let json: unknown;
    try {
      json = JSON.parse(trimmed);
    } catch {
      return fail('starts with "{" but is not valid JSON');
    }
    return readJsonFilter(json);
  }
  const r = new Reader(trimmed);
  const nodes: FilterNode[] = [];
  do {
    nodes.push(readQsNode(r, 1));
    if (nodes.length > FILTER_LIMITS.maxConditions) fail(`has more than ${FILTER_LIMITS.maxConditions} top-level nodes`);
  } while (r.eat(','));
  if (r.pos < r.text.length) fail(`unexpected "${r.text[r.pos]}" at position ${r.pos}`);
  return nodes.length === 1 ? nodes[0] : { and: nodes };
}

// ----- writing the query-string form (the inverse of parseFilterText, for clients and tests)

function qsScalar(v: string | number | boolean | null): string {
  const s = v === null ? '' : String(v);
  if (s === '' || /[,()[\]"\\]/.test(s) || s !== s.trim()) return `"${s.replace(/[\\"]/g, (c) => '\\' + c)}"`;
  return s;
}

export function toQueryString(node: FilterNode): string {
  if ('and' in node) return `and(${node.and.map(toQueryString).join(',')})`;
  if ('or' in node) return `or(${node.or.map(toQueryString).join(',')})`;
  if ('not' in node) return `not(${toQueryString(node.not)})`;
  const head = `${node.field}[${node.op}]`;
  if (node.value === undefined) return head;
  return Array.isArray(node.value) ? `${head}:[${node.value.map(qsScalar).join(',')}]` : `${head}:${qsScalar(node.value)}`;
}
