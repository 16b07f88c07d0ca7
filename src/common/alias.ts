/**
 * Aliases: the URL- and form-friendly identifiers of fields, categories and the like. Pure logic
 * (no Nest, no database), unit-tested in alias.spec.ts.
 */
export const ALIAS_MAX_LENGTH = 64;

/**
 * Derives an alias from a human label: accents folded (é → e), lower-cased, every run of other
 * characters turned into one `separator`, trimmed, and cut to ALIAS_MAX_LENGTH. Returns `fallback`
 * when nothing usable is left (e.g. a label of only punctuation or non-Latin script).
 */
export function aliasFrom(label: string, separator: '_' | '-' = '_', fallback = 'item'): string {
  const folded = label
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/ß/g, 'ss')
    .replace(/[æÆ]/g, 'ae')
    .replace(/[øØ]/g, 'o')
    .toLowerCase();
  const alias = folded
    .replace(/[^a-z0-9]+/g, separator)
    .slice(0, ALIAS_MAX_LENGTH)
    .replace(new RegExp(`^\\${separator}+|\\${separator}+$`, 'g'), '');
  return alias || fallback;
}

/** The n-th candidate for a generated alias: `base`, `base_2`, `base_3`... always within the length limit. */
export function aliasCandidate(base: string, n: number, separator: '_' | '-' = '_'): string {
  if (n <= 1) return base.slice(0, ALIAS_MAX_LENGTH);
  const suffix = `${separator}${n}`;
  return base.slice(0, ALIAS_MAX_LENGTH - suffix.length).replace(new RegExp(`\\${separator}+$`), '') + suffix;
}

/** The first candidate not in `taken`. */
export function firstFreeAlias(base: string, taken: ReadonlySet<string>, separator: '_' | '-' = '_'): string {
  for (let n = 1; ; n++) {
    const candidate = aliasCandidate(base, n, separator);
    if (!taken.has(candidate)) return candidate;
  }
}

/**
 * Runs `insert` with generated alias candidates until one is not taken: `base`, `base_2`, ...
 * starting at the first candidate not in `taken` (a hint read beforehand, which may be stale under
 * concurrency). A unique violation that `isTaken` recognises moves on to the next candidate, so a
 * generated alias never answers 409 to a caller who did not send one. When `insert` runs inside a
 * transaction, it must run in a savepoint (`Transactions.run(work, tx)`) so a failed try does not
 * abort the outer transaction.
 */
export async function withGeneratedAlias<T>(
  base: string,
  taken: ReadonlySet<string>,
  insert: (alias: string) => Promise<T>,
  isTaken: (e: unknown) => boolean,
  separator: '_' | '-' = '_',
  maxAttempts = 100,
): Promise<T> {
  let n = 1;
  while (taken.has(aliasCandidate(base, n, separator))) n++;
  for (let attempt = 0; ; attempt++, n++) {
    try {
      return await insert(aliasCandidate(base, n, separator));
    } catch (e) {
      if (!isTaken(e) || attempt + 1 >= maxAttempts) throw e;
    }
  }
}
