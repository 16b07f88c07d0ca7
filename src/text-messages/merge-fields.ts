import { CONTACT_COLUMNS } from '../contacts/contact.columns.js';

/**
 * Merge fields in broadcast content (pure rules, unit-tested in merge-fields.spec.ts):
 * `{{contact.<property>}}` for each writable text property of the contact (its column map: name,
 * email, phone, company, ...), `{{contact.fields.<alias>}}`, each with an optional default used when the
 * value is missing or empty: `{{contact.name | "there"}}` (a `"` or `\` inside the default is
 * written `\"`, `\\`). Anything else between `{{` and `}}`, an unclosed `{{` or a stray `}}` is
 * refused. The template is rendered per recipient in SQL (templateSql) when a broadcast is sent.
 */
export const CONTACT_MERGE_COLUMNS: ReadonlyMap<string, string> = new Map(
  CONTACT_COLUMNS.writable.filter((w) => w.type === 'text').map((w) => [w.property, w.column]),
);
/** A contact property a template may name (one of CONTACT_MERGE_COLUMNS). */
export type ContactMergeColumn = string;
const MERGE_NAMES = [...CONTACT_MERGE_COLUMNS.keys()].join('|');

export type TemplatePart =
  | { kind: 'text'; text: string }
  | { kind: 'column'; column: ContactMergeColumn; fallback: string | null; source: string }
  | { kind: 'field'; alias: string; fallback: string | null; source: string };

export class MergeFieldError extends Error {}

const TAG = /^\s*contact\.([A-Za-z0-9_]+)(?:\.([A-Za-z0-9_-]+))?\s*(?:\|\s*"((?:[^"\\]|\\.)*)"\s*)?$/s;

/** The parts of a template; throws MergeFieldError naming what is wrong. */
export function parseTemplate(content: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let text = '';
  let i = 0;
  while (i < content.length) {
    const open = content.indexOf('{{', i);
    const strayClose = content.indexOf('}}', i);
    if (strayClose !== -1 && (open === -1 || strayClose < open)) {
      throw new MergeFieldError(`has "}}" without a matching "{{" at position ${strayClose}`);
    }
    if (open === -1) {
      text += content.slice(i);
      break;
    }
    text += content.slice(i, open);
    const close = content.indexOf('}}', open + 2);
    if (close === -1) throw new MergeFieldError(`has an unclosed "{{" at position ${open}`);
    const inner = content.slice(open + 2, close);
    const source = `{{${inner}}}`;
    if (inner.includes('{{')) throw new MergeFieldError(`has a "{{" inside the merge field starting at position ${open}`);
    const m = TAG.exec(inner);
    if (!m)
      throw new MergeFieldError(
        `has a malformed merge field ${source}: use {{contact.<${MERGE_NAMES}>}} or {{contact.fields.<alias>}}, optionally with | "default"`,
      );
    const [, head, sub, rawDefault] = m;
    const fallback = rawDefault === undefined ? null : rawDefault.replace(/\\(.)/gs, '$1');
    if (text) parts.push({ kind: 'text', text });
    text = '';
    if (head === 'fields' && sub !== undefined) parts.push({ kind: 'field', alias: sub, fallback, source });
    else if (sub === undefined && CONTACT_MERGE_COLUMNS.has(head)) {
      parts.push({ kind: 'column', column: head, fallback, source });
    } else throw new MergeFieldError(`has an unknown merge field ${source}`);
    i = close + 2;
  }
  if (text) parts.push({ kind: 'text', text });
  return parts;
}

/** The custom field aliases a template uses. */
export function templateAliases(parts: TemplatePart[]): string[] {
  return [...new Set(parts.flatMap((p) => (p.kind === 'field' ? [p.alias] : [])))];
}

/** A contact as a template reads it: its text properties (CONTACT_MERGE_COLUMNS) and custom field values. */
export type MergeContact = { [property: string]: unknown; fields: Record<string, unknown> | null };

/** Renders a template for one contact (the same result as templateSql). */
export function renderTemplate(parts: TemplatePart[], c: MergeContact): string {
  return parts
    .map((p) => {
      if (p.kind === 'text') return p.text;
      const raw = p.kind === 'column' ? (Object.hasOwn(c, p.column) ? c[p.column] : null) : c.fields?.[p.alias];
      const value = raw === null || raw === undefined ? '' : typeof raw === 'string' ? raw : JSON.stringify(raw);
      return value === '' && p.fallback !== null ? p.fallback : value;
    })
    .join('');
}

/** The contacts column of a merge property; throws for a name that is not one (never SQL text from elsewhere). */
function mergeColumn(property: string): string {
  const column = CONTACT_MERGE_COLUMNS.get(property);
  if (column === undefined) throw new MergeFieldError(`has an unknown merge field {{contact.${property}}}`);
  return column;
}

/**
 * The template as a SQL text expression over a contacts row aliased `alias`. Literal text, defaults
 * and aliases become parameters appended to `params` (never SQL text).
 */
export function templateSql(parts: TemplatePart[], alias: string, params: unknown[]): string {
  const p = (v: string) => {
    params.push(v);
    return `$${params.length}::text`;
  };
  const pieces = parts.map((part) => {
    if (part.kind === 'text') return p(part.text);
    const value = part.kind === 'column' ? `${alias}.${mergeColumn(part.column)}` : `(${alias}.fields ->> ${p(part.alias)})`;
    return part.fallback === null ? `coalesce(${value}, '')` : `coalesce(nullif(${value}, ''), ${p(part.fallback)})`;
  });
  return pieces.length ? `concat(${pieces.join(', ')})` : `''::text`;
}
