/**
 * Rules the server checks beyond what a JSON Schema can say, declared on the DTO property so that
 * the OpenAPI document (common/openapi.ts) describes them. None of them checks anything: the
 * services do. They are kept as class-validator metadata, which PartialType and the other mapped
 * types copy, so every body built from a class carries them.
 */
import { registerDecorator } from 'class-validator';

/**
 * Documents a rule the server checks beyond what a JSON Schema can say: a cross-field rule, a value
 * that must name something that exists, a rule that depends on stored data. It checks nothing
 * itself (the service does). The rule lands in the property's
 * description and `x-rules`, and in the 400 description of each operation taking the body.
 */
export function Rule(text: string) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'documentedRule',
      target: object.constructor,
      propertyName,
      constraints: [text],
      validator: { validate: () => true },
    });
}

/**
 * A body property naming another record by id: when that record does not exist the answer is a 400
 * `validation_failed` whose detail names the property with the message `<target> <id> does not exist`
 * (the foreign key's translation in common/constraints.ts, and the services' own checks). Like Rule,
 * it checks nothing itself; it documents the property (`x-references`) and each operation's 400.
 */
export function References(target: string) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'referencesRecord',
      target: object.constructor,
      propertyName,
      constraints: [target],
      validator: { validate: () => true },
    });
}

/**
 * A text the service trims and refuses when nothing is left (400 "must not be empty"). Like Rule,
 * it checks nothing itself; the schema says it with a pattern (a character other than white space).
 */
export function NotBlank() {
  return (object: object, propertyName: string) =>
    registerDecorator({ name: 'documentedNotBlank', target: object.constructor, propertyName, validator: { validate: () => true } });
}

/** The message of a missing referenced record (common/constraints.ts and the services use the same words). */
export const missingReferenceMessage = (target: string, id: number | string) => `${target} ${id} does not exist`;
