/**
 * class-validator internals the API relies on: its metadata storage's lookup and registration methods
 * (patched once to cache each class's rules) and its map of the classes that have rules (read by the
 * OpenAPI document's completion). class-validator.spec.ts fails with a clear message when an upgrade
 * changes them.
 */
import { getMetadataStorage } from 'class-validator';

type Storage = ReturnType<typeof getMetadataStorage> & { sfCachedLookups?: true };

/**
 * class-validator finds a class's rules on every validate() by walking every class that has rules
 * (to collect inherited ones): about 25 µs of each create contact (src/server/README.md). The rules
 * are fixed once the modules are loaded, so the answer is kept per class and options (requests here
 * validate without groups) and forgotten whenever a rule is added. Same rules, same order.
 */
export function cacheValidationRuleLookups(): void {
  const storage = getMetadataStorage() as Storage;
  if (storage.sfCachedLookups) return;
  storage.sfCachedLookups = true;
  type Lookup = ReturnType<typeof storage.getTargetValidationMetadatas>;
  const lookup = storage.getTargetValidationMetadatas.bind(storage);
  const add = storage.addValidationMetadata.bind(storage);
  let cache = new WeakMap<object, (Lookup | undefined)[]>();
  storage.addValidationMetadata = (metadata) => {
    cache = new WeakMap();
    add(metadata);
  };
  storage.getTargetValidationMetadatas = (target, schema, always, strictGroups, groups) => {
    if (typeof target !== 'function' || schema || (groups && groups.length > 0)) return lookup(target, schema, always, strictGroups, groups);
    let byOptions = cache.get(target);
    if (!byOptions) cache.set(target, (byOptions = []));
    const slot = (always ? 1 : 0) + (strictGroups ? 2 : 0);
    return (byOptions[slot] ??= lookup(target, schema, always, strictGroups, groups));
  };
}

/** Every class that has class-validator rules of its own (the storage's private validationMetadatas map, keyed by class). */
export function classesWithRules(): (abstract new (...args: never[]) => unknown)[] {
  const internal = (getMetadataStorage() as unknown as { validationMetadatas?: Map<unknown, unknown> }).validationMetadatas;
  return [...(internal?.keys() ?? [])].filter((k): k is abstract new (...args: never[]) => unknown => typeof k === 'function');
}
