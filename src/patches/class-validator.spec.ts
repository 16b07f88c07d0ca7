/**
 * The class-validator internals src/patches/class-validator.ts relies on. A failure here after an
 * upgrade means the rule-lookup cache or the OpenAPI document's list of validated classes must be
 * revisited.
 */
import { describe, expect, it } from '@jest/globals';
import { IsInt, IsString, getMetadataStorage, validate } from 'class-validator';
import { cacheValidationRuleLookups, classesWithRules } from './class-validator.js';

class Base {
  @IsString()
  name!: string;
}
class Child extends Base {
  @IsInt()
  count!: number;
}

describe('class-validator metadata storage (src/patches/class-validator.ts)', () => {
  it('has the methods the cache wraps: getTargetValidationMetadatas(target, schema, always, strictGroups, groups) and addValidationMetadata', () => {
    const storage = getMetadataStorage();
    expect(typeof storage.getTargetValidationMetadatas).toBe('function');
    expect(typeof storage.addValidationMetadata).toBe('function');
    expect(storage.getTargetValidationMetadatas.length).toBe(5);
  });

  it('keeps the classes that have rules as the keys of its validationMetadatas map', () => {
    expect((getMetadataStorage() as unknown as { validationMetadatas?: unknown }).validationMetadatas).toBeInstanceOf(Map);
    expect(classesWithRules()).toEqual(expect.arrayContaining([Base, Child]));
  });

  it('answers the same rules with the cache, inherited ones included, and sees a rule added later', async () => {
    const storage = getMetadataStorage();
    const before = storage.getTargetValidationMetadatas(Child, '', true, false).map((m) => `${m.propertyName}:${m.name ?? m.type}`);
    cacheValidationRuleLookups();
    cacheValidationRuleLookups();
    const cached = storage.getTargetValidationMetadatas(Child, '', true, false);
    expect(cached.map((m) => `${m.propertyName}:${m.name ?? m.type}`)).toEqual(before);
    expect(storage.getTargetValidationMetadatas(Child, '', true, false)).toBe(cached);
    expect((await validate(Object.assign(new Child(), { name: 1, count: 'x' }))).map((e) => e.property).sort()).toEqual(['count', 'name']);
    class Later {
      @IsInt()
      n!: number;
    }
    expect(storage.getTargetValidationMetadatas(Child, '', true, false)).not.toBe(cached);
    expect(await validate(Object.assign(new Later(), { n: 'x' }))).toHaveLength(1);
  });
});
